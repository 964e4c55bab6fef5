/**
 * The library's refusals name the paths they were given or made quoted, once (`quoted`: a JSON string, nothing a
 * terminal acts on left raw), and a failed system call by its errno code (`errnoText`), never by Node's message, which
 * repeats the path raw: a path holding ESC or a newline reached a terminal through them as it was, or had the CLI
 * escape the whole message again, doubling the backslashes of its other quotes.
 */
import { mkdirSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readPinnedNote } from '../src/ledger/checkpoint-pin.js';
import { WitnessState } from '../src/witness/state.js';
import { writeFileAtomic } from '../store/fs/atomic-file.js';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { nodeFsOps } from '../store/fs/ops.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { ensurePrivateDir } from '../store/fs/safe-dir.js';
import { tempDir } from './support/tmp.js';

// ESC, a newline and a right-to-left override; quoted: `\u001b`, `\n`, `\u202e`.
const NAME = 'p\u001b[2J\n\u202e';
const SHOWN = 'p\\u001b[2J\\n\\u202e';
const RAW = /[\u0000-\u001f\u007f-\u009f\u202e]/;

async function refusal(p: Promise<unknown>): Promise<Error & { code?: string }> {
  return p.then(
    () => {
      throw new Error('expected a refusal');
    },
    (err: unknown) => err as Error & { code?: string },
  );
}

describe('a path in a refusal is quoted once', () => {
  it('readPinnedNote of a pin that is not there: NOT_FOUND naming it quoted', async () => {
    const dir = tempDir();
    const err = await refusal(readPinnedNote(join(dir, `${NAME}.pin`)));
    expect(err).toMatchObject({ code: 'NOT_FOUND', message: `"${dir}/${SHOWN}.pin": no pinned checkpoint` });
  });

  it('a pin that is a directory: KEY_FILE_UNSAFE naming it quoted', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, `${NAME}.pin`));
    const err = await refusal(readPinnedNote(join(dir, `${NAME}.pin`)));
    expect(err).toMatchObject({ code: 'KEY_FILE_UNSAFE', message: `"${dir}/${SHOWN}.pin" is not a regular file` });
  });

  it("a witness state's key record it cannot read: STORAGE_FAILED naming it quoted and the errno by its code", async () => {
    const dir = join(tempDir(), NAME);
    mkdirSync(join(dir, 'witness.json'), { recursive: true });
    const err = await refusal(WitnessState.open(dir, 'w+11111111+AAAA'));
    expect(err).toMatchObject({
      code: 'STORAGE_FAILED',
      message: `cannot read "${dirname(dir)}/${SHOWN}/witness.json": EISDIR (illegal operation on a directory)`,
    });
  });

  it('writeFileAtomic into a directory that is not there: its error names the path quoted, never the staging file', async () => {
    const dir = tempDir();
    const err = await refusal(writeFileAtomic(join(dir, NAME, 'out.json'), '{}'));
    expect(err).toMatchObject({ code: 'ENOENT', syscall: 'write', path: join(dir, NAME, 'out.json') });
    expect(err.message).toBe(`ENOENT (no such file or directory), write "${dir}/${SHOWN}/out.json"`);
  });

  it('ensurePrivateDir of a symbolic link: the directory quoted', async () => {
    const dir = tempDir();
    symlinkSync(dir, join(dir, NAME));
    const err = await refusal(ensurePrivateDir(join(dir, NAME), 'UNSAFE_ROOT'));
    expect(err).toMatchObject({
      code: 'UNSAFE_ROOT',
      message: `"${dir}/${SHOWN}" is a symbolic link; refusing to use it`,
    });
    expect(err.message).not.toMatch(RAW);
  });

  it("the blob store's failed system call: STORAGE_FAILED by its errno code and the path quoted", async () => {
    const root = join(tempDir(), NAME);
    // A shard directory that cannot be made, failing as Node's fs fails (the path in its message as it is).
    const fs = {
      ...nodeFsOps,
      mkdir: (path: string, mode: number) =>
        path.includes('blobs-v1/')
          ? Promise.reject(
              Object.assign(new Error(`EIO: i/o error, mkdir '${path}'`), {
                code: 'EIO',
                errno: -5,
                syscall: 'mkdir',
                path,
              }),
            )
          : nodeFsOps.mkdir(path, mode),
    };
    const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('auto'), fs });
    const err = await refusal(store.put(new TextEncoder().encode('a blob')));
    expect(err.code).toBe('STORAGE_FAILED');
    expect(err.message).toMatch(/^blob store: mkdir failed: EIO \(i\/o error\), mkdir "/);
    expect(err.message).toContain(`${dirname(root)}/${SHOWN}/blobs-v1/`);
    expect(err.message).not.toMatch(RAW);
  });
});
