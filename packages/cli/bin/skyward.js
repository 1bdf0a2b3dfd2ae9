#!/usr/bin/env node
// The `skyward` executable. It is a file in the repository rather than dist/cli.js itself so that
// `pnpm install` can link it before the first build (otherwise it warns "Failed to create bin").
await import("../dist/cli.js");
