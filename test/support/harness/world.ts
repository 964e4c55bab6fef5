/**
 * A temporary machine for one test: the restricted user's project, another user's project, the
 * Harness's internal folder, the Harness's state (transcripts) and the ledger's store, side by side.
 */
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { FileTool, type Account } from './file-tool.js';

export interface World {
  base: string;
  /** The restricted account's only allowed root. */
  project: string;
  /** Another user's project. */
  foreignProject: string;
  /** The Harness's internal temp folder (where the legacy Harness asked for HANDOFF.md). */
  internalDir: string;
  stateDir: string;
  ledgerRoot: string;
  account: Account;
  fileTool(): Promise<FileTool>;
  cleanup(): Promise<void>;
}

export async function createWorld(principal = 'alice'): Promise<World> {
  const base = await realpath(await mkdtemp(join(tmpdir(), 'handoff-e2e-')));
  const project = join(base, 'projects', principal);
  const foreignProject = join(base, 'projects', 'bob');
  const internalDir = join(base, 'harness', 'internal');
  const stateDir = join(base, 'harness', 'state');
  const ledgerRoot = join(base, 'ledger');
  for (const d of [project, foreignProject, internalDir, stateDir]) await mkdir(d, { recursive: true });
  await writeFile(join(project, 'README.md'), '# alice project\n');
  await writeFile(join(foreignProject, 'secret.txt'), 'bob only\n');
  const account: Account = Object.freeze({ principal, allowedRoots: Object.freeze([project]) });
  return {
    base,
    project,
    foreignProject,
    internalDir,
    stateDir,
    ledgerRoot,
    account,
    fileTool: () => FileTool.create(account, { denied: [ledgerRoot, internalDir, stateDir] }),
    cleanup: () => rm(base, { recursive: true, force: true }),
  };
}

/** Every file under `dir` with its content, for "the project files are unchanged" assertions. */
export async function snapshotTree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!name.isFile()) continue;
    const path = join(name.parentPath, name.name);
    out[relative(dir, path)] = await readFile(path, 'utf8');
  }
  return out;
}
