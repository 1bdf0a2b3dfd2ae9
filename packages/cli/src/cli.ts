#!/usr/bin/env node
/** The `skyward` executable. */
import { describeError } from "./providers.js";
import { runCli } from "./run-cli.js";

const interrupt = new AbortController();
// The first signal asks the command to stop; what it does then (detach a pool again, finish a
// `down`) must not be cut short by a second Ctrl-C, or a pool would be left unreachable or billing.
// The second one only says so; a third ends the CLI at once, for a user who accepts that.
let signals = 0;
const onSignal = (signal: NodeJS.Signals): void => {
  signals += 1;
  if (signals === 1) {
    interrupt.abort(new Error(signal === "SIGINT" ? "interrupted" : "terminated"));
    return;
  }
  if (signals === 2) {
    process.stderr.write(
      "skyward: still finishing what the interrupted command started, so that nothing is left billing or unreachable; a third Ctrl-C ends it now, unfinished\n",
    );
    return;
  }
  process.off("SIGINT", onSignal);
  process.off("SIGTERM", onSignal);
  process.kill(process.pid, signal);
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);
// Provider code failing outside any await must still end the run with a message, never Node's default
// dump of the error (which would bypass the masking of secrets that runCli puts on stderr).
const fail = (error: unknown) => {
  process.stderr.write(`skyward: unexpected error: ${describeError(error)}\n`);
  process.exit(1);
};
process.on("uncaughtException", fail);
process.on("unhandledRejection", fail);

const code = await runCli(process.argv.slice(2), { signal: interrupt.signal });
// Exit now, once output is flushed, rather than wait for an SDK's idle keep-alive sockets.
process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));
