/**
 * `@skyward/cli` — the `skyward` command (`offers`, `instances`, `down`), also callable from code as
 * {@link runCli}.
 */
export { type RunCliOptions, runCli } from "./run-cli.js";
