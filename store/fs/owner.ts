/**
 * Ownership rule for everything the store trusts on disk (OpenSSH's rule for its keys): a file or
 * directory must belong to the user running the process, or to root. A private mode proves nothing
 * when another user owns the file: they can change its contents (a planted key, a rewritten trust list).
 */
export function ownedByUs(uid: number): boolean {
  const me = process.getuid?.();
  // Platforms without uids (Windows) have no such owner check to make.
  return me === undefined || uid === me || uid === 0;
}

export function ownerProblem(path: string, uid: number): string | undefined {
  return ownedByUs(uid)
    ? undefined
    : `${path} is owned by uid ${uid}, not by this user (uid ${process.getuid?.()}) or root`;
}
