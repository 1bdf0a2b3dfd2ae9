/**
 * How a RunPod pod ends itself. Every pod's container carries a pod-scoped `RUNPOD_API_KEY`, its own
 * `RUNPOD_POD_ID` and `runpodctl`: the pod is deleted through the API (`runpodctl pod delete`, runpodctl
 * v2's command, https://github.com/runpod/runpodctl/releases/tag/v2.0.0; else `DELETE /v2/pods/{id}`
 * from Python, for an older runpodctl). Deleting, not stopping, ends the bill: a stopped pod still pays
 * for its volume. RunPod runs no cloud-init, only the container's start command, so that command arms
 * the boot watchdog (checked once) before handing over to the image's own.
 */
import { shellQuote } from "@skyward/core/contract";
import { pythonDeleteRequest, retriedShell, workerWatchdogScript } from "@skyward/provider-utils";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";

/** The delete, by the retry rule every self-destruct shares (the watchdog runs it once); key and id from the environment. */
const DELETE_OWN_POD = retriedShell(
  `runpodctl pod delete "$RUNPOD_POD_ID" || ${pythonDeleteRequest({
    method: "DELETE",
    url: '"https://api.runpod.io/v2/pods/$RUNPOD_POD_ID"',
    header: { variable: "RUNPOD_API_KEY", prefix: "Authorization: Bearer " },
  })}`,
);

/** For a double-quoted shell word. */
const escaped = (text: string) => text.replace(/["\\$`]/g, (character) => `\\${character}`);

/** The self-destruct a worker runs over SSH, which does not inherit the container's environment: the key is read from PID 1's. */
export function selfDestructCommand(podId: string): string {
  return (
    `for kv in $(tr '\\0' '\\n' < /proc/1/environ 2>/dev/null | grep -E '^RUNPOD_API_KEY='); do export "$kv"; done; ` +
    `export RUNPOD_POD_ID=${shellQuote(podId)}; ${DELETE_OWN_POD}`
  );
}

/** The pod's start command (v2's `args`, GraphQL's `dockerArgs`), the watchdog script base64-encoded: no quoting of it reaches RunPod. */
export function watchedStartCommand(options: { seconds: number; root?: string; startCommand: string }) {
  // A shell expansion, braced so that a path going on after `{id}` stays apart from it.
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the shell's `${…}`, written for the shell.
  const root = escaped(options.root ?? DEFAULT_NODE_ROOT).replaceAll("{id}", "${RUNPOD_POD_ID}");
  const seconds = Math.max(1, options.seconds);
  const log = "/tmp/skyward-watchdog.log";
  const watchdog = workerWatchdogScript({ seconds, root, command: DELETE_OWN_POD, check: "once", log });
  const encoded = Buffer.from(`${watchdog}\n`, "utf8").toString("base64");
  return `bash -c "echo ${encoded} | base64 -d | bash; exec ${escaped(options.startCommand)}"`;
}
