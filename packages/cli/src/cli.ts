#!/usr/bin/env node
/** The `skyward` executable. */
import { describeError } from "./providers.js";
import { runCli } from "./run-cli.js";

const interrupt = new AbortController();
process.once("SIGINT", () => interrupt.abort(new Error("interrupted")));
process.once("SIGTERM", () => interrupt.abort(new Error("terminated")));
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
