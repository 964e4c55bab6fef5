// Preloaded (`node --import`) into a `witness serve` or `audit-ui` child by the second-signal tests: the server's
// close() stops listening at once, but its callback (the stopping's end) comes only HOLD_SERVER_CLOSE_MS (default
// 20000) later, as when a request in flight keeps it waiting. Says `holding server close` on stderr when close() is
// called, which is after the command's listener of the first signal ran. Registers no signal listener of its own.
import { Server } from 'node:http';

const holdMs = Number(process.env.HOLD_SERVER_CLOSE_MS ?? 20000);
const close = Server.prototype.close;
Server.prototype.close = function (callback) {
  process.stderr.write('holding server close\n');
  return close.call(this, (...args) => setTimeout(() => callback?.(...args), holdMs));
};
