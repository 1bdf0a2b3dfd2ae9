/**
 * Shell commands on a node's Skyward root directory: whether a process runs, whether the root's
 * worker serves a pool now, stopping that worker, and cleaning up what a pool left there.
 */
import { createHash } from "node:crypto";
import { shellQuote } from "@skyward/core/contract";

/**
 * A shell test that the process `pid` (a number, or shell text that expands to one) runs. A worker
 * runs detached from the SSH session, so it is its node's init that reaps it when it exits: where
 * that init does not reap (a container whose PID 1 is `sleep infinity` or an application), the
 * ended worker stays a zombie, which still answers `kill -0` but runs nothing; /proc's state says Z
 * (without /proc, `kill -0` alone decides).
 */
export function processRunsTest(pid: string): string {
  return `{ kill -0 ${pid} 2>/dev/null && [ "$(sed 's/.*) //' /proc/${pid}/stat 2>/dev/null | cut -c1)" != Z ]; }`;
}

/** The shell command that stops the worker a pool started under `root` (and nothing else). */
export function stopWorkerCommand(root: string): string {
  const pidFile = shellQuote(`${root}/worker.pid`);
  // The worker runs in its own session (setsid), so its process group holds whatever a launcher
  // (accelerate, torchrun) started under it too.
  return `if [ -f ${pidFile} ]; then kill -- -"$(cat ${pidFile})" 2>/dev/null || kill "$(cat ${pidFile})" 2>/dev/null; rm -f ${pidFile}; fi`;
}

/**
 * What a pool's bootstrap keeps under a node's root for the next pool: the virtual environment, the
 * wheel caches, uv and managed Pythons (`tools`), the Python runtime (with the bytecode its Python
 * cached: a later pool with the same runtime sends it but does not unpack it again), and the records
 * the warm check reads.
 */
export const KEPT_NODE_ENTRIES: readonly string[] = Object.freeze([
  "venv",
  "runtime",
  "cache",
  "tools",
  ".content-hash",
  ".plugin-ops-hash",
  ".boot-id",
  ".bootstrap-python",
  ".bootstrap.lock",
]);

/**
 * The shell command that removes what a pool left under a node's root — the includes, `env.sh`
 * (the image's env), the bootstrap script and log, the worker's token, pid and log — and
 * keeps the environment ({@link KEPT_NODE_ENTRIES}), so that a later pool with the same image starts
 * warm on this node. For a self-destruct on a machine that outlives the pool (your own hosts).
 */
export function cleanNodeRootCommand(root: string): string {
  const keep = KEPT_NODE_ENTRIES.map((name) => shellQuote(name)).join(" | ");
  return `if [ -d ${shellQuote(root)} ]; then for entry in ${shellQuote(root)}/* ${shellQuote(root)}/.[!.]* ${shellQuote(root)}/..?*; do [ -e "$entry" ] || [ -L "$entry" ] || continue; case "\${entry##*/}" in ${keep}) ;; *) rm -rf -- "$entry" ;; esac; done; fi`;
}

/** The default Skyward directory on a node. */
export const DEFAULT_NODE_ROOT = "/opt/skyward";

/**
 * A shell test that succeeds when the worker recorded under `root` holds one of `tokens`
 * (`worker.token`): a worker of the pool launching now — its own node coming back after a partition,
 * whose old connection may still look established on the node for a while (until a packet of the
 * node's is refused by the client, or the worker drops it after 30 s of silence). Such a client is
 * no other pool's. Tokens are compared by their SHA-256, so that none appears in a command line.
 */
export function workerHoldsTokenTest(root: string, tokens: readonly string[]): string {
  const digests = tokens.map((token) => createHash("sha256").update(token).digest("hex"));
  return `case "$(sha256sum < ${shellQuote(`${root}/worker.token`)} 2>/dev/null | cut -c1-64)" in ${digests.join("|")}) true ;; *) false ;; esac`;
}

/** Printed by {@link workerServesPoolCommand}, then the worker's pid and port, when the root's worker has a client. */
export const IN_USE_MARKER = "::skyward-in-use::";

/**
 * A shell command that, when the worker recorded under `root` (`worker.pid`, its port in
 * `worker.json`) runs and a client is connected to it — an established connection to its port on
 * this machine's loopback, which is how a pool reaches it (through an SSH tunnel) — prints
 * `IN_USE_MARKER pid port` and fails; else it succeeds and prints nothing. A worker that serves a
 * pool must not be stopped by another pool's launch: its tasks would be lost, and that pool would
 * replace it, stopping this one's in turn. A client gone silent is dropped by the worker within its
 * silence limit, so a dead link does not keep the root taken. Without /proc, nothing is found.
 */
export function workerServesPoolCommand(root: string): string {
  const pidFile = shellQuote(`${root}/worker.pid`);
  const json = shellQuote(`${root}/worker.json`);
  const pid = `"$(cat ${pidFile})"`;
  const established = `cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v port=":$(printf '%04X' "$skyward_busy_port")" '$4 == "01" && substr($2, length($2) - 4) == port { found = 1 } END { exit !found }'`;
  return `if [ -f ${pidFile} ] && ${processRunsTest(pid)} && skyward_busy_port="$(sed -n 's/.*"port":\\([0-9]*\\).*/\\1/p' ${json} 2>/dev/null)" && [ -n "$skyward_busy_port" ] && ${established}; then echo "${IN_USE_MARKER} $(cat ${pidFile}) $skyward_busy_port"; false; fi`;
}
