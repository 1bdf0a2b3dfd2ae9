/**
 * The `onstart` script every Skyward instance on Vast.ai runs at boot, arming its self-destruct
 * (`containerSelfDestructScript`): Vast.ai gives each container its id and an API key scoped to that
 * instance (`CONTAINER_ID`, `CONTAINER_API_KEY`), with which the installed command destroys it
 * (`DELETE /api/v0/instances/$CONTAINER_ID/`); the boot watchdog runs it after
 * `watchdogGraceSeconds` without a running worker under `root` (0: no watchdog).
 */
import { containerSelfDestructScript } from "@skyward/provider-utils";

/** Where the self-destruct command is installed on the instance. */
export const SELF_DESTRUCT_COMMAND = "/usr/local/bin/skyward-self-destruct";

/** Vast.ai's limit on the length of `onstart`. */
export const ONSTART_MAX_LENGTH = 4048;

/**
 * The `onstart` script of the settings' instances; on the node `{id}` in `root` is its `$CONTAINER_ID`.
 * Throws past `maxLength` (the settings' check, which names `root`, measures with no limit).
 */
export function onstartScript(
  settings: { readonly watchdogGraceSeconds: number; readonly root?: string | undefined },
  maxLength = ONSTART_MAX_LENGTH,
): string {
  const script = containerSelfDestructScript({
    graceSeconds: settings.watchdogGraceSeconds,
    root: (settings.root ?? "/opt/skyward").replaceAll("{id}", "$CONTAINER_ID"),
    label: "Vast.ai",
    variables: ["CONTAINER_ID", "CONTAINER_API_KEY"],
    envFile: "vast-instance.env",
    command: SELF_DESTRUCT_COMMAND,
    // The key read from the saved file and passed on standard input.
    request: {
      method: "DELETE",
      url: '"https://console.vast.ai/api/v0/instances/$CONTAINER_ID/"',
      header: { variable: "CONTAINER_API_KEY", prefix: "Authorization: Bearer " },
    },
  });
  // A guard for future edits of the script, which Vast.ai would refuse.
  if (script.length > maxLength)
    throw new Error(
      `the onstart script has ${script.length} characters, Vast.ai accepts ${ONSTART_MAX_LENGTH}`,
    );
  return script;
}
