/**
 * The provider conformance suite of `@skyward/testing`, run against moto: the `v1` contract's
 * offers and lifecycle, with moto's own inventory as the judge of what is left.
 */
import { runProviderConformance } from "@skyward/testing";
import { describe } from "vitest";
import { AWS } from "../src/index.js";
import { motoInventory, motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason();

describe.skipIf(skipReason !== undefined)("AWS against moto", () => {
  const suite = useMotoSuite("skyward-aws-conformance-");

  runProviderConformance({
    name: "aws (moto)",
    create: () => AWS({ endpoint: suite.moto.endpoint }),
    spec: { vcpus: 2, memoryGb: 4, architecture: "x86_64" },
    supports: { accelerator: "T4" },
    provisionCount: 2,
    unknownInstanceId: "i-0123456789abcdef0",
    leftovers: async () => {
      const left = await motoInventory(suite.moto.endpoint);
      return [...left.liveInstances, ...left.securityGroups, ...left.keyPairs];
    },
  });
});
