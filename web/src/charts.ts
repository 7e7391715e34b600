import uPlot from 'uplot';
import { epochSeconds } from './dates';

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
    return {
      width,
      height: 200,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      series: [
        { label: 'Day (UTC)' },
        { label: this.label, stroke: cssVar('--series'), width: 2, points: { show: true, size: 5 } },
      ],
      axes: [axis, { ...axis, size: 50 }],
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
