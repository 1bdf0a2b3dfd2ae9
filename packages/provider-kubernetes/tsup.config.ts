// The build most packages share: see tsup.package.ts at the root.
export { default } from "../../tsup.package.ts";
