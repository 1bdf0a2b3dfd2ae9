/** Whether a process with this pid is alive on this machine (the test bed's hosts share it). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
