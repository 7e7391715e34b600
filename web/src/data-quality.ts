import { ApiError, describeProblem, get, KeyInfo } from './api';

/** One row of GET /api/v1/plan/quality. */
export interface EventQuality {
  eventName: string;
  accepted: number;
  flagged: number;
  rejected: number;
  topRules: { field: string; rule: string; count: number }[];
}

const HEADERS = ['Event', 'Accepted', 'Flagged', 'Rejected', 'Top violated rules'];

function el<K extends keyof HTMLElementTagNameMap>(tag: K, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * The "Data quality" view: per event name over the chosen range, what the app's tracking plan
 * accepted, flagged and rejected, and the rules broken most often, read from
 * GET /api/v1/plan/quality. Shown only to a key with `plans:read`.
 */
export class DataQualityView {
  private readonly section = el('section');
  private readonly body = el('tbody');
  private readonly note = el('p');
  private generation = 0;

  constructor(parent: HTMLElement) {
    this.section.className = 'card';
    this.section.id = 'data-quality';
    this.section.setAttribute('aria-labelledby', 'data-quality-title');
    this.section.hidden = true;
    const head = el('div');
    head.className = 'section-head';
    const title = el('h2', 'Data quality');
    title.id = 'data-quality-title';
    head.append(title);
    this.note.className = 'muted small';
    const wrap = el('div');
    wrap.className = 'scroll';
    const table = el('table');
    const tr = el('tr');
    HEADERS.forEach((h, i) => {
      const th = el('th', h);
      th.scope = 'col';
      if (i > 0 && i < 4) th.className = 'num';
      tr.append(th);
    });
    table.append(el('thead'), this.body);
    table.tHead!.append(tr);
    wrap.append(table);
    this.section.append(head, this.note, wrap);
    parent.append(this.section);
  }

  /** Loads the app's counts over [from, to] (UTC days); hides the view for a key without plans:read. */
  async load(key: KeyInfo | null, appId: string, from: string, to: string): Promise<void> {
    const generation = ++this.generation;
    if (!key || !key.scopes.includes('plans:read') || !appId) {
      this.section.hidden = true;
      return;
    }
    let rows: EventQuality[];
    try {
      rows = await get<EventQuality[]>('/api/v1/plan/quality', { appId, fromDate: from, toDate: to });
    } catch (err) {
      if (generation !== this.generation) return;
      this.show(
        [],
        err instanceof ApiError ? describeProblem(err.problem) : 'The data-quality counts could not be read.',
      );
      return;
    }
    if (generation !== this.generation) return;
    this.show(rows, rows.length ? '' : 'No event was checked against a tracking plan in this range.');
  }

  private show(rows: EventQuality[], note: string): void {
    this.section.hidden = false;
    this.note.textContent = note;
    this.note.hidden = note === '';
    this.body.replaceChildren(
      ...rows.map((r) => {
        const tr = el('tr');
        const rules = r.topRules.map((x) => `${x.field} (${x.rule}) ×${x.count}`).join(', ') || '–';
        [r.eventName, r.accepted, r.flagged, r.rejected, rules].forEach((value, i) => {
          const td = el('td', String(value));
          if (i > 0 && i < 4) td.className = 'num';
          tr.append(td);
        });
        return tr;
      }),
    );
  }
}
