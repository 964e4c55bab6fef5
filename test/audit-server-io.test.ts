/**
 * The auditor page's server when the filesystem fails under a file it serves: the stat of a bundle file, or closing
 * it, failing with an I/O error is a 500 (or, once the answer is under way, a connection cut), never an unhandled
 * rejection that ends the process; a file that shrinks once its length was announced has its connection cut. `open` of
 * node:fs/promises is wrapped to fail (or truncate the file after its stat) where a test says.
 */
import { mkdirSync, realpathSync, truncateSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { FileHandle } from 'node:fs/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startAuditServer, type AuditServer } from '../src/ops/audit-server.js';
import { tempDir } from './support/tmp.js';

const failing = { stat: new Set<string>(), close: new Set<string>(), shrink: new Set<string>() };
const eio = (syscall: string) => Object.assign(new Error(`EIO: i/o error, ${syscall}`), { code: 'EIO', syscall });

vi.mock('node:fs/promises', async (importOriginal) => {
  const fsp = await importOriginal<typeof import('node:fs/promises')>();
  const open = async (...args: Parameters<typeof fsp.open>): Promise<FileHandle> => {
    const handle = await fsp.open(...args);
    const path = String(args[0]);
    if (failing.stat.has(path)) handle.stat = (() => Promise.reject(eio('fstat'))) as FileHandle['stat'];
    if (failing.shrink.has(path)) {
      // The file is cut to 2 bytes once its stat was taken: the answer's Content-Length says more than can be read.
      const stat = handle.stat.bind(handle);
      handle.stat = (async () => {
        const st = await stat();
        truncateSync(path, 2);
        return st;
      }) as FileHandle['stat'];
    }
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
    failing.shrink.clear();
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

  it('cuts the connection of a file that shrank after its Content-Length was sent, before any other answer on it', async () => {
    const { url, manifests } = await serving();
    writeFileSync(manifests, '{"a":1}\n{"b":2}\n');
    failing.shrink.add(manifests);
    const { host, pathname } = new URL(url);
    // Two requests on one connection (the second would end it): the answer to the first announces 16 bytes and has 2.
    // Kept alive, the connection carried the second answer next, which a client reads as the rest of the file's 16.
    const sent = await new Promise<string>((resolve) => {
      const socket = connect(Number(new URL(url).port), '127.0.0.1');
      let got = '';
      socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
      socket.on('error', () => {});
      socket.on('close', () => resolve(got));
      socket.write(
        `GET ${pathname} HTTP/1.1\r\nHost: ${host}\r\n\r\nGET /bundle/nothing HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      );
    });
    expect(sent.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200']);
    expect(sent).toMatch(/content-length: 16\r\n/i);
    expect(sent.endsWith('\r\n\r\n{"')).toBe(true);
    failing.shrink.clear();
    writeFileSync(manifests, '{}\n');
    expect(await (await fetch(url)).text()).toBe('{}\n');
  });
});
