/**
 * The ledger a compaction test hands `compact` when the answer must publish nothing: it publishes nothing itself and
 * counts the publishes it was asked for (`published`), which a refused answer leaves at 0.
 */
export function countingLedger() {
  const ledger = {
    published: 0,
    publish: async () => {
      ledger.published++;
      return { id: 'x' as never, seq: 0, digest: 'x' as never, size: 1 };
    },
  };
  return ledger;
}
