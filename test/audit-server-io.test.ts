/**
 * The auditor page's server when the filesystem fails under a file it serves: the stat of a bundle file, or closing
 * it, failing with an I/O error is a 500 (or, once the answer is under way, a connection cut), never an unhandled
 * rejection that ends the process. `open` of node:fs/promises is wrapped to fail where a test says.
 */
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FileHandle } from 'node:fs/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startAuditServer, type AuditServer } from '../src/ops/audit-server.js';
import { tempDir } from './support/tmp.js';

const failing = { stat: new Set<string>(), close: new Set<string>() };
const eio = (syscall: string) => Object.assign(new Error(`EIO: i/o error, ${syscall}`), { code: 'EIO', syscall });

vi.mock('node:fs/promises', async (importOriginal) => {
  const fsp = await importOriginal<typeof import('node:fs/promises')>();
  const open = async (...args: Parameters<typeof fsp.open>): Promise<FileHandle> => {
    const handle = await fsp.open(...args);
    const path = String(args[0]);
    if (failing.stat.has(path)) handle.stat = (() => Promise.reject(eio('fstat'))) as FileHandle['stat'];
    if (failing.close.has(path)) {
      const close = handle.close.bind(handle);
      handle.close = async () => {
        await close();
        throw eio('close');
      };
    }
    return handle;
  };
  return { ...fsp, open };
});

describe('audit server: a bundle file whose stat or close fails', () => {
  let server: AuditServer | undefined;
  afterEach(async () => {
    failing.stat.clear();
    failing.close.clear();
    await server?.close();
    server = undefined;
  });

  async function serving(): Promise<{ url: string; manifests: string }> {
    const root = realpathSync(tempDir());
    const bundle = join(root, 'bundle');
    mkdirSync(bundle);
    const manifests = join(bundle, 'manifests.jsonl');
    writeFileSync(manifests, '{}\n');
    const page = join(root, 'index.html');
    writeFileSync(page, '<!doctype html><meta charset="utf-8" /><title>t</title>');
    server = await startAuditServer({ page, bundle });
    return { url: `${server.url}bundle/manifests.jsonl`, manifests };
  }

  it('answers 500 when the stat fails, and goes on serving', async () => {
    const { url, manifests } = await serving();
    failing.stat.add(manifests);
    const r = await fetch(url);
    expect(r.status).toBe(500);
    expect(await r.text()).toMatch(/manifests\.jsonl cannot be read \(EIO\)/);
    failing.stat.clear();
    const again = await fetch(url);
    expect(again.status).toBe(200);
    expect(await again.text()).toBe('{}\n');
  });

  it('ends the exchange when the close fails after the file was sent, and goes on serving', async () => {
    const { url, manifests } = await serving();
    failing.close.add(manifests);
    // The answer was sent before the close failed: the client has it, or sees the connection cut.
    const r = await fetch(url).then(
      async (res) => ({ status: res.status, text: await res.text() }),
      () => undefined,
    );
    if (r) expect(r).toEqual({ status: 200, text: '{}\n' });
    failing.close.clear();
    expect((await fetch(url)).status).toBe(200);
  });
});
