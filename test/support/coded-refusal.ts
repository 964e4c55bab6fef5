import { isHandoffLedgerError } from '../../store/index.js';

/** What `call` threw (awaited): its class name, code and message; fails for an uncoded error or none. */
export async function codedRefusal(call: () => unknown): Promise<{ name: string; code: string; message: string }> {
  try {
    await call();
  } catch (err) {
    if (isHandoffLedgerError(err)) return { name: err.name, code: err.code, message: err.message };
    throw new Error(`uncoded: ${String(err)}`, { cause: err });
  }
  throw new Error('no error');
}
