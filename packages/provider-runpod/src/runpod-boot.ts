/**
 * How a RunPod pod ends itself. Every pod carries a pod-scoped `RUNPOD_API_KEY` and its own
 * `RUNPOD_POD_ID` in its container's environment, and `runpodctl`: the pod is deleted through the API
 * (`runpodctl pod delete`, runpodctl v2's command, https://github.com/runpod/runpodctl/releases/tag/v2.0.0;
 * else `DELETE /v2/pods/{id}` from Python, for an image whose runpodctl predates v2). Deleting — not
 * stopping — is what ends the bill: a stopped pod still pays for its volume.
 *
 * The boot watchdog: RunPod runs no cloud-init, only the container's start command, so the pod's start
 * command arms it before handing over to the image's own (`/start.sh`, which starts sshd): if no Skyward
 * worker has started within N seconds, the pod deletes itself — a client killed between create and
 * bootstrap (an image pull can take 30 minutes) leaves nothing billing.
 */
import { shellQuote } from "@skyward/core/contract";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";

/** Deletes the pod `$RUNPOD_POD_ID` with `$RUNPOD_API_KEY`; neither is ever on a command line. */
const DELETE_OWN_POD =
  'runpodctl pod delete "$RUNPOD_POD_ID" || python3 -c \'import os, urllib.request as r; r.urlopen(r.Request("https://api.runpod.io/v2/pods/" + os.environ["RUNPOD_POD_ID"], method="DELETE", headers={"Authorization": "Bearer " + os.environ["RUNPOD_API_KEY"]}), timeout=60)\'';

/**
 * The self-destruct a worker runs over SSH. An SSH session does not inherit the container's
 * environment, so the pod-scoped key is read from PID 1's.
 */
export function selfDestructCommand(podId: string): string {
  return (
    `for kv in $(tr '\\0' '\\n' < /proc/1/environ 2>/dev/null | grep -E '^RUNPOD_API_KEY='); do export "$kv"; done; ` +
    `export RUNPOD_POD_ID=${shellQuote(podId)}; ${DELETE_OWN_POD}`
  );
}

/** A path for a double-quoted shell word, `{id}` becoming the pod's id. */
function podPath(root: string): string {
  const escaped = root.replace(/["\\$`]/g, (character) => `\\${character}`);
  // A shell expansion, not a template: braced, so a path going on after `{id}` stays apart from it.
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the shell's `${…}`, written for the shell.
  return escaped.replaceAll("{id}", "${RUNPOD_POD_ID}");
}

/**
 * The pod's start command (v2's `args`, GraphQL's `dockerArgs`): arms the watchdog in the background,
 * then runs `startCommand`. The script travels base64-encoded, so no quoting of it reaches RunPod.
 */
export function watchedStartCommand(options: {
  readonly seconds: number;
  readonly root: string | undefined;
  readonly startCommand: string;
}): string {
  const seconds = Math.max(1, Math.ceil(options.seconds));
  const root = podPath(options.root ?? DEFAULT_NODE_ROOT);
  const watchdog = [
    `# Skyward boot watchdog: no worker ${seconds} s after the container started, and the pod deletes itself.`,
    "(",
    `  sleep ${seconds}`,
    `  if ! [ -e "${root}/worker.pid" ] && ! [ -e "${root}/worker.log" ]; then`,
    `    ${DELETE_OWN_POD}`,
    "  fi",
    ") </dev/null >/tmp/skyward-watchdog.log 2>&1 &",
  ].join("\n");
  const encoded = Buffer.from(`${watchdog}\n`, "utf8").toString("base64");
  return `bash -c "echo ${encoded} | base64 -d | bash; exec ${options.startCommand.replace(/["\\$`]/g, (character) => `\\${character}`)}"`;
}
