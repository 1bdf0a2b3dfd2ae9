/**
 * Whether a Skyward worker has started on a machine since it booted, as a boot watchdog asks it: a
 * worker's start leaves `worker.pid` and `worker.log` under Skyward's root. A marker written before
 * this boot does not count: its worker died with that boot (a VM restarted after host maintenance, an
 * instance rebooted), and with its client dead or detached nothing else would end the machine.
 */
import { shellQuote } from "@skyward/core/contract";

/**
 * The shell function `skyward_started` (POSIX sh, GNU `stat`): true when `root`'s `worker.pid` or
 * `worker.log` was written since boot (`/proc/uptime`), with 5 s for the clock's rounding. Where `stat`
 * cannot tell, a marker counts, as it did before.
 */
export function workerStartedFunction(root: string): string {
  const quoted = shellQuote(root);
  return `skyward_started() {
  booted=$(( $(date +%s) - $(cut -d. -f1 /proc/uptime 2>/dev/null || echo 0) - 5 ))
  for marker in ${quoted}/worker.pid ${quoted}/worker.log; do
    if [ -e "$marker" ] && [ "$(stat -c %Y "$marker" 2>/dev/null || echo "$booted")" -ge "$booted" ]; then return 0; fi
  done
  return 1
}`;
}
