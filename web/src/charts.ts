import uPlot from 'uplot';
import { appZone } from './app-zone';
import { epochSeconds, isoDay } from './dates';
import { formatNumber } from './format';

// Counts have whole-number ticks only: 1, 2 and 5 times a power of ten.
const COUNT_INCRS = Array.from({ length: 13 }, (_, k) => [1, 2, 5].map((m) => m * 10 ** k)).flat();
// Width in CSS pixels that one day label ("Nov 25") needs on the x axis.
const DAY_LABEL_SPACE = 64;
const HALF_DAY_S = 43_200;
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

/** One line of a chart: its legend label, the data-* attribute that holds its values, its colour. */
export interface Line {
  label: string;
  key: string;
  color: string;
}

export interface Series {
  days: string[];
  /** One array of values per line, in the order of the chart's lines. */
  values: number[][];
  /** Per day: its numbers can still change (the day is not over, or not recomputed since). */
  open: boolean[];
}

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** A diagonal hatch in `color`, for the open days' band. */
function hatch(ctx: CanvasRenderingContext2D, color: string): CanvasPattern | string {
  const tile = document.createElement('canvas');
  tile.width = 8;
  tile.height = 8;
  const t = tile.getContext('2d');
  if (!t) return color;
  t.strokeStyle = color;
  t.lineWidth = 1.5;
  t.beginPath();
  t.moveTo(0, 8);
  t.lineTo(8, 0);
  t.stroke();
  return ctx.createPattern(tile, 'repeat') ?? color;
}

/**
 * Where the open days lie on the chart: each is drawn as a dashed line into it over a hatched band
 * labelled "open", so that a day still filling up does not read as a fall.
 */
function drawOpenBand(u: uPlot, openDays: number[]): void {
  if (openDays.length === 0) return;
  const { ctx, bbox } = u;
  const left = Math.max(bbox.left, u.valToPos(Math.min(...openDays) - HALF_DAY_S, 'x', true));
  const right = Math.min(bbox.left + bbox.width, u.valToPos(Math.max(...openDays) + HALF_DAY_S, 'x', true));
  const muted = cssVar('--muted');
  ctx.save();
  ctx.globalAlpha = 0.35;
  ctx.fillStyle = hatch(ctx, muted);
  ctx.fillRect(left, bbox.top, Math.max(2, right - left), bbox.height);
  ctx.globalAlpha = 1;
  ctx.fillStyle = muted;
  ctx.font = `${Math.round(11 * devicePixelRatio)}px system-ui, sans-serif`;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'top';
  ctx.fillText('open', right - 2 * devicePixelRatio, bbox.top + 2 * devicePixelRatio);
  ctx.restore();
}

/**
 * A daily line chart of one or more lines. The numbers it draws are also in the figure's data-*
 * attributes (`data-days`, one attribute per line, `data-open` for the open days).
 */
export class DailyChart {
  private plot: uPlot | null = null;
  private series: Series = { days: [], values: [], open: [] };
  private readonly target: HTMLElement;
  private readonly lines: Line[];

  constructor(
    private readonly figure: HTMLElement,
    lines: string | Line[],
  ) {
    this.lines = typeof lines === 'string' ? [{ label: lines, key: 'values', color: '--series' }] : lines;
    this.target = figure.querySelector('.plot') as HTMLElement;
    new ResizeObserver(() => this.resize()).observe(this.target);
  }

  private axes(): uPlot.Axis[] {
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
    return [x, y];
  }

  private options(width: number): uPlot.Options {
    const full = this.series.values;
    const solid: uPlot.Series[] = this.lines.map((line, i) => ({
      label: line.label,
      stroke: cssVar(line.color),
      width: 2,
      points: { show: true, size: 5 },
      // The legend reads the whole line, the open days included.
      value: (_u, _v, _s, idx) => (idx === null ? '–' : formatNumber(full[i]?.[idx])),
    }));
    const dashed: uPlot.Series[] = this.lines.map((line) => ({
      label: `${line.label} (open)`,
      stroke: cssVar(line.color),
      width: 2,
      dash: [5, 4],
      points: { show: true, size: 5, fill: cssVar('--card') },
    }));
    const openDays = this.series.days.filter((_, i) => this.series.open[i]).map(epochSeconds);
    return {
      width,
      height: 200,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      series: [
        // Each day is a calendar day of the app's zone, placed at 00:00 UTC of its date.
        { label: `Day (${appZone()})`, value: (_u, ts) => (ts === null ? '–' : isoDay(ts * 1000)) },
        ...solid,
        ...dashed,
      ],
      axes: this.axes(),
      legend: { show: true },
      hooks: { draw: [(u) => drawOpenBand(u, openDays)] },
    };
  }

  /** The data uPlot draws: each line solid over the final days, dashed into the open ones. */
  private data(): uPlot.AlignedData {
    const { days, values, open } = this.series;
    const firstOpen = open.indexOf(true);
    const solid = values.map((v) => v.map((n, i) => (open[i] ? null : n)));
    const dashed = values.map((v) =>
      v.map((n, i) => (open[i] || (firstOpen > 0 && i === firstOpen - 1) ? n : null)),
    );
    return [days.map(epochSeconds), ...solid, ...dashed];
  }

  private width(): number {
    return Math.max(240, Math.floor(this.target.clientWidth));
  }

  render(series: Series): void {
    this.series = series;
    const { dataset } = this.figure;
    dataset.days = series.days.join(',');
    this.lines.forEach((line, i) => (dataset[line.key] = (series.values[i] ?? []).join(',')));
    dataset.open = series.days.filter((_, i) => series.open[i]).join(',');
    this.markOpen(series.open.includes(true));
    const first = series.values[0] ?? [];
    const total = first.reduce((a, b) => a + b, 0);
    this.target.setAttribute('role', 'img');
    this.target.setAttribute(
      'aria-label',
      `${this.lines.map((l) => l.label).join(', ')} from ${series.days[0] ?? '–'} to ${series.days.at(-1) ?? '–'}` +
        (this.lines.length === 1 ? `: total ${total}, peak ${Math.max(0, ...first)}` : '') +
        (dataset.open ? `; open: ${dataset.open}.` : '.'),
    );
    this.draw();
  }

  /** The caption's "open" mark, shown while a day of the chart is open. */
  private markOpen(on: boolean): void {
    const caption = this.figure.querySelector('figcaption');
    let mark = caption?.querySelector<HTMLElement>('.open') ?? null;
    if (!caption) return;
    if (!mark) {
      mark = document.createElement('span');
      mark.className = 'open';
      mark.textContent = 'open';
      mark.title = 'The hatched day is not over or not yet recomputed; its numbers can still grow.';
      caption.append(' ', mark);
    }
    mark.hidden = !on;
  }

  /** Redraws from scratch, e.g. when the colour scheme changes. */
  draw(): void {
    this.plot?.destroy();
    this.plot = new uPlot(this.options(this.width()), this.data(), this.target);
    // The dashed companions share their line's legend entry.
    this.plot.root
      .querySelectorAll<HTMLElement>('.u-legend .u-series')
      .forEach((row, i) => (row.hidden = i > this.lines.length));
  }

  private resize(): void {
    if (this.plot && Math.abs(this.plot.width - this.width()) > 1) {
      this.plot.setSize({ width: this.width(), height: 200 });
    }
  }
}
