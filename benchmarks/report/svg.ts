/**
 * Throughput against size as a hand-written SVG (no dependency): log2 size on x, log10 MiB/s on y,
 * one line per case (median) with a bar for min–max. The limit is dashed, the peer dotted, the ledger solid.
 */
import { fmt, sizeLabel } from '../lib/stats.js';
import { caseNames } from './tables.js';
import type { BenchResults, SizeRow } from './model.js';

const W = 900;
const H = 500;
const PLOT = { left: 70, right: 640, top: 50, bottom: 440 };
const COLORS: Record<string, string> = {
  'raw durable write': '#444444',
  'raw durable write (flush-behind)': '#225522',
  'synced batch + pin': '#666633',
  'raw read': '#888888',
  'raw read + hash': '#aaaaaa',
  'raw read + hash + text': '#bbbb88',
  'cacache.put': '#d62728',
  'cacache.get': '#ff9896',
  'publish (native)': '#17becf',
  'resume (native)': '#7f7f7f',
  'publish (wasm)': '#1f77b4',
  'resume (wasm)': '#2ca02c',
  'publish (noble)': '#9467bd',
  'resume (noble)': '#8c564b',
  'publish (postgres)': '#e377c2',
  'resume (postgres)': '#bcbd22',
  'raw durable write, alone': '#000000',
  'raw durable write (flush-behind), alone': '#003300',
  'publish (native), alone': '#ff7f0e',
  'publish (wasm), alone': '#ffbb78',
  'publish (noble), alone': '#c5b0d5',
};
const DASH: Record<string, string> = { limit: '6 4', peer: '2 3', ledger: '' };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

export function throughputSvg(r: BenchResults): string {
  const sizes = r.config.sizes;
  const rows = r.sizes.filter((s) => s.mibPerSecond.median > 0);
  const all = rows.flatMap((s) => [s.mibPerSecond.min, s.mibPerSecond.max]).filter((x) => x > 0);
  const yMin = 10 ** Math.floor(Math.log10(Math.min(...all, 1)));
  const yMax = 10 ** Math.ceil(Math.log10(Math.max(...all, 10)));
  const x0 = Math.log2(sizes[0]!);
  const x1 = Math.log2(sizes[sizes.length - 1]!);
  const x = (size: number) => PLOT.left + ((Math.log2(size) - x0) / Math.max(1, x1 - x0)) * (PLOT.right - PLOT.left);
  const y = (v: number) =>
    PLOT.bottom -
    ((Math.log10(v) - Math.log10(yMin)) / (Math.log10(yMax) - Math.log10(yMin))) * (PLOT.bottom - PLOT.top);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
  );
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(
    `<text x="${PLOT.left}" y="24" font-size="15" font-weight="bold">handoff-ledger: throughput against summary size (median, min–max)</text>`,
  );
  out.push(
    `<text x="${PLOT.left}" y="40" fill="#555555">${esc(`${r.startedAt.slice(0, 10)} · ${r.machine.cpus} × ${r.machine.cpuModel} · Node ${r.machine.node} · ${r.mode} run`)}</text>`,
  );
  for (let e = Math.log10(yMin); e <= Math.log10(yMax) + 1e-9; e++) {
    const v = 10 ** e;
    out.push(
      `<line x1="${PLOT.left}" x2="${PLOT.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#e5e5e5"/>`,
    );
    out.push(`<text x="${PLOT.left - 8}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${fmt(v)}</text>`);
  }
  for (const size of sizes) {
    out.push(
      `<line x1="${x(size).toFixed(1)}" x2="${x(size).toFixed(1)}" y1="${PLOT.top}" y2="${PLOT.bottom}" stroke="#f0f0f0"/>`,
    );
    out.push(`<text x="${x(size).toFixed(1)}" y="${PLOT.bottom + 18}" text-anchor="middle">${sizeLabel(size)}</text>`);
  }
  out.push(
    `<rect x="${PLOT.left}" y="${PLOT.top}" width="${PLOT.right - PLOT.left}" height="${PLOT.bottom - PLOT.top}" fill="none" stroke="#999999"/>`,
  );
  out.push(
    `<text x="${(PLOT.left + PLOT.right) / 2}" y="${H - 20}" text-anchor="middle">summary size (canonical bytes, log scale)</text>`,
  );
  out.push(
    `<text transform="translate(18 ${(PLOT.top + PLOT.bottom) / 2}) rotate(-90)" text-anchor="middle">MiB/s (log scale)</text>`,
  );
  const names = caseNames(r);
  names.forEach((name, i) => {
    const series = rows.filter((s) => s.case === name).sort((a, b) => a.size - b.size);
    const color = COLORS[name] ?? '#17becf';
    const dash = DASH[series[0]!.group] ?? '';
    const pts = series.map((s: SizeRow) => `${x(s.size).toFixed(1)},${y(s.mibPerSecond.median).toFixed(1)}`).join(' ');
    out.push(
      `<polyline points="${pts}" fill="none" stroke="${color}" stroke-width="2"${dash ? ` stroke-dasharray="${dash}"` : ''}/>`,
    );
    for (const s of series) {
      const cx = x(s.size).toFixed(1);
      out.push(
        `<line x1="${cx}" x2="${cx}" y1="${y(s.mibPerSecond.min).toFixed(1)}" y2="${y(s.mibPerSecond.max).toFixed(1)}" stroke="${color}" stroke-width="1"/>`,
      );
      out.push(
        `<circle cx="${cx}" cy="${y(s.mibPerSecond.median).toFixed(1)}" r="3" fill="${color}"><title>${esc(`${name}, ${sizeLabel(s.size)}: ${fmt(s.mibPerSecond.median)} MiB/s`)}</title></circle>`,
      );
    }
    const ly = PLOT.top + 10 + i * 20;
    out.push(
      `<line x1="${PLOT.right + 20}" x2="${PLOT.right + 50}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2"${dash ? ` stroke-dasharray="${dash}"` : ''}/>`,
    );
    out.push(`<text x="${PLOT.right + 58}" y="${ly + 4}">${esc(name)}</text>`);
  });
  const legendEnd = PLOT.top + 10 + names.length * 20;
  out.push(
    `<text x="${PLOT.right + 20}" y="${legendEnd + 10}" fill="#555555">dashed: the limit · dotted: the peer</text>`,
  );
  out.push('</svg>');
  return out.join('\n') + '\n';
}
