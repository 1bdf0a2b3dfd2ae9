/**
 * The provider conformance suite of `@skyward/testing`, run against moto: the `v1` contract's
 * offers and lifecycle, with moto's own inventory as the judge of what is left.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runProviderConformance } from "@skyward/testing";
import { afterAll, beforeAll, describe } from "vitest";
import { createAWS } from "../src/index.js";
import {
  type MotoServer,
  motoInventory,
  motoSkipReason,
  startMoto,
  useFakeAwsEnvironment,
} from "./moto-server.js";

const skipReason = motoSkipReason();

describe.skipIf(skipReason !== undefined)("AWS against moto", () => {
  let moto: MotoServer;
  let restoreEnvironment: () => void = () => undefined;
  let home = "";
  const previousHome = process.env.SKYWARD_HOME;

  beforeAll(async () => {
    restoreEnvironment = useFakeAwsEnvironment();
    home = await mkdtemp(join(tmpdir(), "skyward-aws-conformance-"));
    process.env.SKYWARD_HOME = home;
    moto = await startMoto();
  });

  afterAll(async () => {
    await moto?.stop();
    restoreEnvironment();
    if (previousHome === undefined) delete process.env.SKYWARD_HOME;
    else process.env.SKYWARD_HOME = previousHome;
    await rm(home, { recursive: true, force: true });
  });

  runProviderConformance({
    name: "aws (moto)",
    create: () => createAWS({ endpoint: moto.endpoint }),
    spec: { vcpus: 2, memoryGb: 4, architecture: "x86_64" },
    supports: { accelerator: "T4" },
    provisionCount: 2,
    unknownInstanceId: "i-0123456789abcdef0",
    leftovers: async () => {
      const left = await motoInventory(moto.endpoint);
      return [...left.liveInstances, ...left.securityGroups, ...left.keyPairs];
    },
  });
});
