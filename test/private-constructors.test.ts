/**
 * The stores' and logs' constructors are private in TypeScript, but JavaScript calls them: `new FsBlobStore(root,
 * options)` made a store that skipped open's checks of its root (a private directory, its device and inode), `new
 * LevelManifestLog(db, write)` a log without its format marker check or lock. Each refuses, naming the open to call.
 */
import { describe, expect, it } from 'vitest';
import { FsBlobStore, PgBlobStore } from '../store/index.js';
import { LevelManifestLog, PgManifestLog } from '../manifests/index.js';
import { nobleBlake3 } from '../store/hash/digest.js';
import { codedRefusal } from './support/coded-refusal.js';

type AnyClass = new (...args: unknown[]) => unknown;

describe('a store or log made with new', () => {
  const cases: Array<[string, AnyClass, unknown[], string]> = [
    [
      'FsBlobStore',
      FsBlobStore as unknown as AnyClass,
      ['/tmp/x', { hash: nobleBlake3 }],
      'FsBlobStore.open(root, options)',
    ],
    ['PgBlobStore', PgBlobStore as unknown as AnyClass, [{}, { hash: nobleBlake3 }], 'PgBlobStore.open(options)'],
    [
      'LevelManifestLog',
      LevelManifestLog as unknown as AnyClass,
      [{}, async () => {}],
      'LevelManifestLog.open(path, options)',
    ],
    ['PgManifestLog', PgManifestLog as unknown as AnyClass, [{}], 'PgManifestLog.open(options)'],
  ];
  for (const [name, Class, args, open] of cases)
    it(`${name}: INVALID_ARGUMENT naming ${open}`, async () => {
      const refusal = await codedRefusal(() => new Class(...args));
      expect(refusal.code).toBe('INVALID_ARGUMENT');
      expect(refusal.message).toBe(`${name} is not made with new: open one with ${open}`);
    });
});
