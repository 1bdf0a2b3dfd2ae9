/**
 * The provider conformance suite of `@skyward/testing`, run against moto: the `v1` contract's
 * offers and lifecycle, with moto's own inventory as the judge of what is left.
 */
import { runProviderConformance, type ScratchSkywardHome, useScratchSkywardHome } from "@skyward/testing";
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
  let home: ScratchSkywardHome | undefined;

  beforeAll(async () => {
    restoreEnvironment = useFakeAwsEnvironment();
    home = await useScratchSkywardHome("skyward-aws-conformance-");
    moto = await startMoto();
  });

  afterAll(async () => {
    await moto?.stop();
    restoreEnvironment();
    await home?.restore();
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
