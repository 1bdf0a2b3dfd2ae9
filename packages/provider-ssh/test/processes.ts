import { isProcessRunning } from "@skyward/testing";

/** Whether a process with this pid runs on this machine (the test bed's hosts share it); a zombie does not. */
export const alive = isProcessRunning;
