/**
 * Draws the history model on a canvas that only ever covers the visible part of the picture (a
 * 100,000-manifest bundle would be millions of pixels), and makes it usable without a mouse: the
 * picture is one focusable widget; arrow keys move between manifests, and the selected manifest's
 * fields appear as text in the details panel. Shapes, not only colours, tell the states apart.
 * Text is drawn with fillText, so nothing from a bundle is ever parsed as HTML.
 *
 * To a screen reader the picture is a listbox (WAI-ARIA's listbox pattern, with aria-activedescendant): focus stays
 * on it, and it names the selected manifest's one option, the only one in the DOM (the others are its place in the
 * set: aria-setsize, aria-posinset), so moving says a short name (session, seq, state), not the details' ten
 * fields. The details panel is not live: it is read when the auditor goes to it.
 */
import { printable } from '../../manifests/encoding/printable.js';
import { markFor, type HistoryModel, type Mark, type MarkState, type Row } from './model.js';

export const ROW_HEIGHT = 28;
export const CELL = 14;
export const LABEL_WIDTH = 190;
const MAX_HEIGHT = 420;

export const STATE_STYLE: Record<MarkState, { colour: string; label: string; shape: string }> = {
  verified: { colour: '#1a7f37', label: 'verified', shape: 'filled square' },
  finding: { colour: '#cf222e', label: 'finding', shape: 'triangle' },
  'blob-missing': { colour: '#9a6700', label: 'blob missing', shape: 'hollow circle' },
};

export interface Cursor {
  row: number;
  index: number;
}

export class HistoryView {
  private model: HistoryModel = { rows: [], maxSeq: 0, byLine: new Map(), firstLines: new Map() };
  private cursor: Cursor | undefined;
  private readonly ctx: CanvasRenderingContext2D;
  /** How many marks come before each row (its first mark's place in the set, from 0). */
  private before: number[] = [];
  /** The selected manifest as the listbox's option (the scroller is the listbox). */
  private readonly option: HTMLElement;

  constructor(
    private readonly scroller: HTMLElement,
    private readonly space: HTMLElement,
    private readonly canvas: HTMLCanvasElement,
    private readonly onSelect: (mark: Mark | undefined, row: Row | undefined) => void,
  ) {
    this.ctx = canvas.getContext('2d')!;
    this.option = document.createElement('div');
    this.option.setAttribute('role', 'option');
    this.option.setAttribute('aria-selected', 'true');
    this.option.className = 'visually-hidden';
    scroller.append(this.option);
    scroller.addEventListener('scroll', () => this.draw());
    scroller.addEventListener('keydown', (e) => this.onKey(e));
    canvas.addEventListener('mousemove', (e) => this.pick(e, false));
    canvas.addEventListener('click', (e) => this.pick(e, true));
    new ResizeObserver(() => this.draw()).observe(scroller);
  }

  setModel(model: HistoryModel): void {
    this.model = model;
    this.cursor = model.rows.length > 0 ? { row: 0, index: 0 } : undefined;
    let n = 0;
    this.before = model.rows.map((r) => ((n += r.marks.length), n - r.marks.length));
    this.space.style.width = `${LABEL_WIDTH + (model.maxSeq + 2) * CELL}px`;
    this.space.style.height = `${Math.max(1, model.rows.length) * ROW_HEIGHT}px`;
    // A few sessions get a short picture; many get a scrolling one.
    this.scroller.style.height = `${Math.min(MAX_HEIGHT, Math.max(1, model.rows.length) * ROW_HEIGHT + 18)}px`;
    this.draw();
    this.announce();
  }

  /**
   * Selects the manifest a finding on `line` is about (a finding's link; a repeated manifest's is the mark of its
   * first line), scrolls it into view and focuses the picture.
   */
  selectLine(line: number): boolean {
    const mark = markFor(this.model, line);
    if (!mark) return false;
    const row = this.model.rows.findIndex((r) => r.session === mark.session);
    const index = this.model.rows[row]!.marks.indexOf(mark);
    this.moveTo({ row, index });
    this.scroller.focus();
    return true;
  }

  get selected(): Mark | undefined {
    return this.cursor && this.model.rows[this.cursor.row]?.marks[this.cursor.index];
  }

  private moveTo(cursor: Cursor): void {
    this.cursor = cursor;
    const mark = this.selected!;
    const x = LABEL_WIDTH + mark.seq * CELL;
    const y = cursor.row * ROW_HEIGHT;
    const s = this.scroller;
    if (x < s.scrollLeft + LABEL_WIDTH || x + CELL > s.scrollLeft + s.clientWidth) s.scrollLeft = x - s.clientWidth / 2;
    if (y < s.scrollTop || y + ROW_HEIGHT > s.scrollTop + s.clientHeight) s.scrollTop = y - s.clientHeight / 2;
    this.draw();
    this.announce();
  }

  private announce(): void {
    const row = this.cursor && this.model.rows[this.cursor.row];
    const mark = this.selected;
    if (mark && row && this.cursor) {
      // A new id at each move: a screen reader says the option aria-activedescendant names when that changes.
      this.option.id = `history-line-${mark.line}`;
      const codes = mark.codes.length ? ` (${mark.codes.join(', ')})` : '';
      const fork = row.forks.includes(mark.seq) ? ', fork' : '';
      this.option.textContent = printable(
        `${row.session}, seq ${mark.seq}${fork}: ${STATE_STYLE[mark.state].label}${codes}`,
      );
      this.option.setAttribute('aria-posinset', String(this.before[this.cursor.row]! + this.cursor.index + 1));
      this.option.setAttribute('aria-setsize', String(this.before.at(-1)! + this.model.rows.at(-1)!.marks.length));
      this.option.hidden = false;
      this.scroller.setAttribute('aria-activedescendant', this.option.id);
    } else {
      // Nothing to select (no manifest, or none the filters keep): no option, none active.
      this.option.hidden = true;
      this.option.removeAttribute('id');
      this.scroller.removeAttribute('aria-activedescendant');
    }
    this.onSelect(mark, row);
  }

  private onKey(e: KeyboardEvent): void {
    const c = this.cursor;
    if (!c) return;
    const rows = this.model.rows;
    const nearest = (row: number) => {
      const seq = this.selected!.seq;
      const marks = rows[row]!.marks;
      let best = 0;
      marks.forEach((m, i) => {
        if (Math.abs(m.seq - seq) < Math.abs(marks[best]!.seq - seq)) best = i;
      });
      return { row, index: best };
    };
    const last = rows[c.row]!.marks.length - 1;
    const moves: Record<string, () => Cursor> = {
      ArrowRight: () => ({ row: c.row, index: Math.min(last, c.index + 1) }),
      ArrowLeft: () => ({ row: c.row, index: Math.max(0, c.index - 1) }),
      ArrowDown: () => nearest(Math.min(rows.length - 1, c.row + 1)),
      ArrowUp: () => nearest(Math.max(0, c.row - 1)),
      PageDown: () => nearest(Math.min(rows.length - 1, c.row + 10)),
      PageUp: () => nearest(Math.max(0, c.row - 10)),
      Home: () => ({ row: c.row, index: 0 }),
      End: () => ({ row: c.row, index: last }),
    };
    const move = moves[e.key];
    if (!move) return;
    e.preventDefault();
    this.moveTo(move());
  }

  private pick(e: MouseEvent, click: boolean): void {
    const r = this.canvas.getBoundingClientRect();
    const x = e.clientX - r.left + this.scroller.scrollLeft;
    const y = e.clientY - r.top + this.scroller.scrollTop;
    const row = Math.floor(y / ROW_HEIGHT);
    const seq = Math.round((x - LABEL_WIDTH - CELL / 2) / CELL);
    const marks = this.model.rows[row]?.marks;
    if (!marks || seq < 0) return;
    const index = marks.findIndex((m) => m.seq === seq);
    if (index < 0) return;
    this.moveTo({ row, index });
    if (click) this.scroller.focus();
  }

  private draw(): void {
    const s = this.scroller;
    const dpr = window.devicePixelRatio || 1;
    const w = s.clientWidth;
    const h = s.clientHeight;
    if (this.canvas.width !== w * dpr || this.canvas.height !== h * dpr) {
      this.canvas.width = w * dpr;
      this.canvas.height = h * dpr;
      this.canvas.style.width = `${w}px`;
      this.canvas.style.height = `${h}px`;
    }
    this.canvas.style.transform = `translate(${s.scrollLeft}px, ${s.scrollTop}px)`;
    const ctx = this.ctx;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const first = Math.floor(s.scrollTop / ROW_HEIGHT);
    const lastRow = Math.min(this.model.rows.length - 1, Math.ceil((s.scrollTop + h) / ROW_HEIGHT));
    const seqFrom = Math.max(0, Math.floor(s.scrollLeft / CELL) - 1);
    const seqTo = Math.ceil((s.scrollLeft + w) / CELL);
    ctx.font = '12px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (let r = first; r <= lastRow; r++) {
      const row = this.model.rows[r]!;
      const y = r * ROW_HEIGHT - s.scrollTop + ROW_HEIGHT / 2;
      const xOf = (seq: number) => LABEL_WIDTH + seq * CELL + CELL / 2 - s.scrollLeft;
      if (r % 2 === 1) {
        ctx.fillStyle = '#f6f8fa';
        ctx.fillRect(0, y - ROW_HEIGHT / 2, w, ROW_HEIGHT);
      }
      ctx.strokeStyle = '#8c959f';
      ctx.lineWidth = 1;
      ctx.setLineDash([]);
      ctx.beginPath();
      ctx.moveTo(xOf(0), y);
      ctx.lineTo(xOf(row.maxSeq), y);
      ctx.stroke();
      for (const [a, b] of row.gaps) this.drawGap(xOf(a) - CELL / 2, xOf(b) + CELL / 2, y);
      for (const seq of row.forks) {
        if (seq < seqFrom || seq > seqTo) continue;
        ctx.strokeStyle = '#8250df';
        ctx.lineWidth = 2;
        ctx.setLineDash([]);
        ctx.beginPath();
        ctx.moveTo(xOf(seq), y - 13);
        ctx.lineTo(xOf(seq), y + 13);
        ctx.stroke();
      }
      for (const m of row.marks) {
        if (m.seq < seqFrom || m.seq > seqTo) continue;
        const forked = row.forks.includes(m.seq);
        const my = forked ? y - 5 + Math.min(m.lane, 2) * 10 : y;
        drawMark(ctx, m.state, xOf(m.seq), my);
      }
      ctx.fillStyle = r % 2 === 1 ? '#f6f8fa' : '#ffffff';
      ctx.fillRect(0, y - ROW_HEIGHT / 2, LABEL_WIDTH - 4, ROW_HEIGHT);
      ctx.fillStyle = '#1f2328';
      ctx.fillText(clip(row.session, 26), 6, y);
    }
    const sel = this.selected;
    if (sel && this.cursor) {
      const x = LABEL_WIDTH + sel.seq * CELL + CELL / 2 - s.scrollLeft;
      const y = this.cursor.row * ROW_HEIGHT - s.scrollTop + ROW_HEIGHT / 2;
      ctx.strokeStyle = '#0969da';
      ctx.lineWidth = 2;
      ctx.setLineDash([]);
      ctx.beginPath();
      ctx.arc(x, y, 10, 0, Math.PI * 2);
      ctx.stroke();
    }
  }

  private drawGap(x0: number, x1: number, y: number): void {
    const ctx = this.ctx;
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(x0, y - 3, x1 - x0, 6);
    ctx.strokeStyle = '#cf222e';
    ctx.lineWidth = 1.5;
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    ctx.moveTo(x0, y);
    ctx.lineTo(x1, y);
    ctx.stroke();
    ctx.setLineDash([]);
  }
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function drawMark(ctx: CanvasRenderingContext2D, state: MarkState, x: number, y: number): void {
  ctx.fillStyle = ctx.strokeStyle = STATE_STYLE[state].colour;
  ctx.lineWidth = 2;
  ctx.setLineDash([]);
  ctx.beginPath();
  if (state === 'verified') {
    ctx.fillRect(x - 4, y - 4, 8, 8);
  } else if (state === 'finding') {
    ctx.moveTo(x, y - 6);
    ctx.lineTo(x + 6, y + 5);
    ctx.lineTo(x - 6, y + 5);
    ctx.closePath();
    ctx.fill();
  } else {
    ctx.arc(x, y, 5, 0, Math.PI * 2);
    ctx.stroke();
  }
}
