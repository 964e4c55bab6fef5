/**
 * An open's recovery removes the staging files (`tmp/*.tmp`) interrupted blob writes left; a write stages a file. A
 * directory under such a name is none of ours (an operator's `notes.tmp/`): it is neither removed, with all it holds,
 * nor named as a leftover by an open to diagnose.
 */
import { describe, expect, it } from 'vitest';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { tempDir } from './support/tmp.js';

describe("an open's recovery of tmp/", () => {
  it('removes a staging file a crash left, and leaves a directory named like one, and what it holds, as it is', async () => {
    const root = tempDir();
    const hash = await loadHashBackend('auto');
    await (await FsBlobStore.open(root, { hash })).store.close();
    const crashed = join(root, 'tmp', `${'cd'.repeat(16)}.tmp`);
    await writeFile(crashed, 'half a blob', { mode: 0o600 });
    const notes = join(root, 'tmp', 'notes.tmp');
    await mkdir(notes, { mode: 0o700 });
    await writeFile(join(notes, 'kept.txt'), 'an operator put this here');
    for (const keepStagingMs of [undefined, 0]) {
      const diagnosed = await FsBlobStore.open(root, { hash, keepStagingMs, leaveLeftovers: true });
      await diagnosed.store.close();
      expect(diagnosed.recovery.leftInPlace?.staging).toEqual([crashed]);
    }
    const { store, recovery } = await FsBlobStore.open(root, { hash });
    await store.close();
    expect(recovery.stagingRemoved).toBe(1);
    expect(await readdir(join(root, 'tmp'))).toEqual(['notes.tmp']);
    expect(await readFile(join(notes, 'kept.txt'), 'utf8')).toBe('an operator put this here');
  });
});
