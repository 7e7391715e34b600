import uPlot from 'uplot';
import { appZone } from './app-zone';
import { epochSeconds, isoDay } from './dates';

// Counts have whole-number ticks only: 1, 2 and 5 times a power of ten.
const COUNT_INCRS = Array.from({ length: 13 }, (_, k) => [1, 2, 5].map((m) => m * 10 ** k)).flat();
// Width in CSS pixels that one day label ("Nov 25") needs on the x axis.
const DAY_LABEL_SPACE = 64;
const dayLabel = new Intl.DateTimeFormat('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });

/**
 * The days (epoch seconds) that get a label: always the last day of the data, then every `step`
 * days back, with `step` as small as lets the labels fit in `width`.
 */
export function dayTicks(days: ArrayLike<number>, width: number): number[] {
  const fit = Math.max(2, Math.floor(width / DAY_LABEL_SPACE));
  const step = Math.max(1, Math.ceil(days.length / fit));
  const ticks: number[] = [];
  for (let i = days.length - 1; i >= 0; i -= step) ticks.unshift(days[i]);
  return ticks;
}

export interface Series {
  days: string[];
  values: number[];
}

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** One daily line chart. The numbers it draws are also in the figure's data-* attributes. */
export class DailyChart {
  private plot: uPlot | null = null;
  private series: Series = { days: [], values: [] };
  private readonly target: HTMLElement;

  constructor(
    private readonly figure: HTMLElement,
    private readonly label: string,
  ) {
    this.target = figure.querySelector('.plot') as HTMLElement;
    new ResizeObserver(() => this.resize()).observe(this.target);
  }

  private options(width: number): uPlot.Options {
    const fg = cssVar('--muted');
    const grid = cssVar('--grid');
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    // The labels drawn on each axis are also in the figure's data-x-ticks and data-y-ticks.
    const x: uPlot.Axis = {
      ...axis,
      splits: (u) => dayTicks(u.data[0], u.width),
      values: (_u, splits) => {
        this.figure.dataset.xTicks = splits.map((s) => isoDay(s * 1000)).join(',');
        return splits.map((s) => dayLabel.format(s * 1000));
      },
    };
    const y: uPlot.Axis = {
      ...axis,
      size: 50,
      incrs: COUNT_INCRS,
      values: (_u, splits) => {
        this.figure.dataset.yTicks = splits.join(',');
        return splits.map((s) => s.toLocaleString());
      },
    };
    return {
      width,
      height: 200,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      series: [
        // Each day is a calendar day of the app's zone, placed at 00:00 UTC of its date.
        { label: `Day (${appZone()})`, value: (_u, ts) => (ts === null ? '–' : isoDay(ts * 1000)) },
        { label: this.label, stroke: cssVar('--series'), width: 2, points: { show: true, size: 5 } },
      ],
      axes: [x, y],
      legend: { show: true },
    };
  }

  private width(): number {
    return Math.max(240, Math.floor(this.target.clientWidth));
  }

  render(series: Series): void {
    this.series = series;
    this.figure.dataset.days = series.days.join(',');
    this.figure.dataset.values = series.values.join(',');
    const total = series.values.reduce((a, b) => a + b, 0);
    this.target.setAttribute('role', 'img');
    this.target.setAttribute(
      'aria-label',
      `${this.label} from ${series.days[0] ?? '–'} to ${series.days.at(-1) ?? '–'}: total ${total}, peak ${Math.max(0, ...series.values)}.`,
    );
    this.draw();
  }

  /** Redraws from scratch, e.g. when the colour scheme changes. */
  draw(): void {
    this.plot?.destroy();
    const data: uPlot.AlignedData = [this.series.days.map(epochSeconds), this.series.values];
    this.plot = new uPlot(this.options(this.width()), data, this.target);
  }

  private resize(): void {
    if (this.plot && Math.abs(this.plot.width - this.width()) > 1) {
      this.plot.setSize({ width: this.width(), height: 200 });
    }
  }
}
