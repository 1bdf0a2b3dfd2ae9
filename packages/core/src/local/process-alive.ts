/**
 * Whether a process of this machine is alive, for the Local provider and attach: a worker that
 * exited but is not reaped yet (a zombie, while its parent — often this very process, which
 * started it — has not collected it) runs nothing and answers nothing, so it counts as gone.
 */
import { readFileSync } from "node:fs";

/** Whether process `pid` of this machine runs (exists, and is not a zombie waiting to be reaped). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  return !zombie(pid);
}

/** Linux's /proc says so (state `Z`); where there is no /proc (macOS) a signallable process runs. */
function zombie(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return false;
  }
  // The command name (in parentheses) may hold spaces and parentheses: the state follows the last ")".
  return stat
    .slice(stat.lastIndexOf(")") + 1)
    .trim()
    .startsWith("Z");
}
