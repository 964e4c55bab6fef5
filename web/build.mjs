// Builds the auditor's page into one self-contained file, dist/web/index.html: the verification
// worker and the page script are bundled (IIFE: classic scripts also run from file://, where module
// scripts are refused), the worker's source is embedded and started from a blob: URL, and the inline
// script and style are pinned by hash in a Content-Security-Policy that allows no network access
// beyond the page's own origin (used only when `handoff-ledger audit-ui` serves a bundle).
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'vite';

const WEB = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(WEB, '..');
const OUT = join(ROOT, 'dist', 'web');

async function bundle(entry, define = {}) {
  const result = await build({
    configFile: false,
    logLevel: 'warn',
    root: ROOT,
    define: { 'process.env.NODE_ENV': '"production"', ...define },
    build: {
      write: false,
      minify: true,
      target: 'es2022',
      sourcemap: false,
      reportCompressedSize: false,
      lib: { entry: join(WEB, entry), formats: ['iife'], name: 'handoffLedgerAudit', fileName: () => 'out.js' },
    },
  });
  const outputs = (Array.isArray(result) ? result : [result]).flatMap((r) => r.output);
  const chunks = outputs.filter((o) => o.type === 'chunk');
  if (chunks.length !== 1) throw new Error(`${entry}: expected one chunk, got ${chunks.length}`);
  return chunks[0].code;
}

const sha256 = (text) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/** Text that would end the inline <script> (or start an HTML comment in it) cannot be inlined. */
function assertInlinable(js) {
  if (/<\/script|<!--/i.test(js)) throw new Error('the bundled script contains </script or <!--; it cannot be inlined');
}

export async function buildWeb() {
  const worker = await bundle('worker/verify.worker.ts');
  // \u003c keeps "</script" out of the embedded worker text; JSON strings decode it back to "<".
  const workerLiteral = JSON.stringify(worker).replace(/</g, '\\u003c');
  const js = (await bundle('app.ts', { __WORKER_SOURCE__: workerLiteral })).trim();
  assertInlinable(js);
  const css = (await readFile(join(WEB, 'style.css'), 'utf8')).trim();
  const csp = [
    "default-src 'none'",
    `script-src ${sha256(js)} 'wasm-unsafe-eval'`,
    `style-src ${sha256(css)}`,
    'worker-src blob:',
    "connect-src 'self'",
    'img-src blob: data:',
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
  const template = await readFile(join(WEB, 'index.html'), 'utf8');
  // Function replacers: `$` in the code must not be read as a replacement pattern.
  const html = template
    .replace('__CSP__', () => csp)
    .replace(/<style>\s*__CSS__\s*<\/style>/, () => `<style>${css}</style>`)
    .replace(/<script>\s*__JS__;?\s*<\/script>/, () => `<script>${js}</script>`);
  if (html.includes('__JS__') || html.includes('__CSS__') || html.includes('__CSP__'))
    throw new Error('index.html template placeholders were not all filled');
  await mkdir(OUT, { recursive: true });
  // Written aside and renamed into place: test files build the page concurrently, and `npm pack` or a
  // browser reading it meanwhile must see one whole page, never a half-written one.
  const aside = join(OUT, `.index.html.${process.pid}.tmp`);
  await writeFile(aside, html);
  await rename(aside, join(OUT, 'index.html'));
  const bytes = Buffer.byteLength(html);
  const gzipped = gzipSync(html, { level: 9 }).length;
  return { path: join(OUT, 'index.html'), bytes, gzipped, workerBytes: Buffer.byteLength(worker) };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const r = await buildWeb();
  const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
  process.stdout.write(`${r.path}: ${kib(r.bytes)}, ${kib(r.gzipped)} gzipped (worker ${kib(r.workerBytes)})\n`);
}
