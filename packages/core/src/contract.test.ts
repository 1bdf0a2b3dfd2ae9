/**
 * `@skyward/core/contract` exports what a provider or plugin author needs and nothing else. Every
 * export names a user outside core: a file that imports it from `@skyward/core/contract` (several
 * where the first may move in a split; one is enough). A type needs no user of its own when a used
 * export's signature names it (`ProvisionOptions` through `ProviderV1.provision`), since an author
 * annotating that call needs it too. An export with no user, or a new one added without one, fails.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const repositoryRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const entryPath = join(repositoryRoot, "packages", "core", "src", "contract.ts");

/** Each export of the entry, and the files outside core that import it. */
const USERS: Record<string, string | readonly string[]> = {
  // The provider contract, its calls and the shapes they exchange
  ProviderV1: "packages/ssh/src/index.ts",
  Provider: "packages/testing/src/config-entry.ts",
  ProviderCallOptions: "packages/testing/src/conformance.ts",
  Cluster: "packages/provider-aws/src/aws-provider.ts",
  Instance: "packages/ssh/src/worker-launcher.ts",
  InstanceSsh: ["packages/provider-utils/src/instances.ts", "packages/testing/src/testbed.ts"],
  InstanceStatus: "packages/provider-gcp/src/vms.ts",
  Offer: "packages/provider-aws/src/machine-images.ts",
  OfferQuery: "packages/provider-gcp/src/offers.ts",
  OffersOptions: "packages/provider-aws/test/offer-cache.test.ts",
  GetInstanceOptions: "packages/ssh/src/worker-launcher.ts",
  LaunchWorkerOptions: "packages/ssh/src/worker-launcher.ts",
  ReconnectWorkerOptions: "packages/ssh/src/worker-launcher.ts",
  WorkerEndpoint: "packages/ssh/src/worker-launcher.ts",
  PoolResource: "packages/provider-aws/src/cleanup.ts",
  LeftPoolResource: "packages/provider-gcp/src/teardown.ts",
  CleanupResult: "packages/provider-utils/src/machine-provider/pool-resources.ts",
  PoolSpec: "packages/provider-runpod/src/runpod-provider.ts",
  PROVIDER_METHODS: "packages/testing/src/conformance-shapes.ts",
  isProvider: "packages/provider-gcp/test/config-file.test.ts",
  whyNotProvider: "packages/testing/src/conformance.ts",
  clusterFromInstance: "packages/cli/src/down-command.ts",
  // Offers: the query, prices, cached listings
  offerQuery: "packages/testing/src/conformance.ts",
  offerPrice: ["packages/provider-utils/src/offers/offer-filter.ts", "packages/cli/src/offers-command.ts"],
  offerFormFactorFit: [
    "packages/provider-utils/src/offers/offer-filter.ts",
    "packages/cli/src/offers-command.ts",
  ],
  cachedOffers: "packages/provider-gcp/test/lifecycle.test.ts",
  resolvePoolSpec: "packages/provider-gcp/test/lifecycle.test.ts",
  volumeClientKeysProblem: "packages/ssh/src/volumes.ts",
  // Accelerators and images, as providers read them
  acceleratorCatalog: "packages/provider-aws/src/instance-types.ts",
  acceleratorFormFactor: "packages/provider-aws/src/instance-types.ts",
  acceleratorFromName: "packages/cli/src/offers-command.ts",
  acceleratorSchema: "packages/provider-ssh/src/ssh-provider.ts",
  canonicalAcceleratorName: "packages/provider-aws/src/instance-types.ts",
  containerImageSchema: [
    "packages/provider-runpod/src/runpod-settings.ts",
    "packages/provider-novita/src/novita-settings.ts",
    "packages/provider-vastai/src/vastai-settings.ts",
  ],
  // The plugin contract, its builder and the hook runners the conformance suites use
  PluginV1: "packages/plugin-jax/src/jax.ts",
  Plugin: "packages/plugin-jax/src/jax.ts",
  PluginWorker: "packages/testing/src/plugin-conformance.ts",
  PoolHandle: "packages/testing/src/plugin-conformance.ts",
  ClusterHookOptions: "packages/plugin-mig/src/index.ts",
  JsonValue: "packages/plugin-accelerate/src/index.ts",
  LaunchCommand: "packages/plugin-accelerate/src/index.ts",
  LaunchContext: "packages/plugin-accelerate/src/index.ts",
  extendImage: "packages/plugin-jax/src/jax.ts",
  workersPerAccelerator: "packages/plugin-accelerate/src/index.ts",
  isWorkersPerAccelerator: "packages/plugin-jax/src/jax.test.ts",
  isPlugin: "packages/plugin-jax/src/jax.test.ts",
  whyNotPlugin: "packages/testing/src/plugin-conformance.ts",
  pluginSchema: "packages/plugin-mig/src/index.test.ts",
  normalizePlugin: "packages/testing/src/plugin-conformance.ts",
  applyImageTransforms: "packages/plugin-jax/src/jax.test.ts",
  applyLaunchers: "packages/testing/src/plugin-conformance.ts",
  collectBootstrapOps: "packages/plugin-huggingface/src/index.test.ts",
  collectPluginBootstrapOps: "packages/testing/src/plugin-conformance.ts",
  collectPluginSecrets: "packages/plugin-huggingface/src/index.test.ts",
  enterAroundClient: "packages/testing/src/plugin-conformance.ts",
  resolveWorkerLayout: "packages/plugin-torch/src/torch.test.ts",
  resolveWorkersPerNode: "packages/testing/src/plugin-conformance.ts",
  workerModules: "packages/plugin-jax/src/jax.test.ts",
  // Errors a provider or plugin throws
  ConfigurationError: "examples/third-party-plugin/src/index.ts",
  ConfigurationIssue: "packages/testing/src/config-entry.ts",
  NoCapacityError: "packages/provider-utils/src/machine-provider/market-loop.ts",
  ProvisionError: "packages/provider-gcp/src/prepare.ts",
  refuseElasticPool: "packages/plugin-torch/src/torch.ts",
  refuseProcessExecutor: "packages/plugin-jax/src/jax.ts",
  IncompleteListingError: [
    "packages/provider-aws/src/aws-provider.ts",
    "packages/cli/src/instances-command.ts",
  ],
  ProvisionAttempt: "packages/provider-utils/src/machine-provider/market-loop.ts",
  ConnectionError: "packages/provider-ssh/src/ssh-provider.ts",
  BootstrapError: "packages/ssh/src/worker-launcher.ts",
  PluginError: "packages/plugin-mig/src/index.test.ts",
  // Helpers: input validation, shell quoting, secrets, where things are
  parseInput: ["packages/plugin-jax/src/jax.ts", "examples/third-party-provider/src/index.ts"],
  shellQuote: ["packages/plugin-mig/src/index.ts", "packages/ssh/src/worker-launcher.ts"],
  Redactor: "packages/cli/src/redact.ts",
  REDACTED: "packages/cli/src/redact.ts",
  skywardHome: ["packages/provider-utils/src/keys.ts", "packages/ssh/src/transport.ts"],
  version: "packages/ssh/src/worker-launcher.ts",
  // The bootstrap scripts' building blocks (`@skyward/ssh` and the GCP startup script)
  BootstrapInput: "packages/ssh/src/bootstrap-script.ts",
  BootstrapMarker: "packages/ssh/src/bootstrap-script.test.ts",
  BOOTSTRAP_SHELL_LIBRARY: "packages/ssh/src/bootstrap-script.test.ts",
  assembleBootstrapScript: "packages/ssh/src/bootstrap-script.ts",
  bootstrapLayout: "packages/ssh/src/bootstrap-script.ts",
  describeBootstrapFailure: "packages/ssh/src/worker-launcher.ts",
  parseBootstrapMarker: "packages/ssh/src/worker-launcher.ts",
  renderEnvPhase: "packages/ssh/src/bootstrap-script.ts",
  renderPluginsPhase: "packages/ssh/src/bootstrap-script.ts",
  validateBootstrapInput: "packages/ssh/src/bootstrap-script.ts",
  DEFAULT_PIP_INDEX: "packages/ssh/src/bootstrap-script.ts",
  pipInstallSteps: "packages/ssh/src/bootstrap-script.ts",
  contentHash: "packages/ssh/src/worker-launcher.ts",
  collectIncludedFiles: "packages/ssh/src/worker-launcher.ts",
  pythonRuntimeDirectory: "packages/ssh/src/worker-launcher.ts",
};

/** The names a file imports or re-exports from `@skyward/core/contract` (`import { a, type B } from …`). */
function contractImportsOf(text: string): Set<string> {
  const names = new Set<string>();
  for (const match of text.matchAll(
    /(?:import|export)\s+(?:type\s+)?\{([^}]*)\}\s*from\s*["']@skyward\/core\/contract["']/g,
  )) {
    for (const specifier of (match[1] ?? "").split(",")) {
      const name = specifier
        .trim()
        .replace(/^type\s+/, "")
        .split(/\s+as\s+/)[0]
        ?.trim();
      if (name) names.add(name);
    }
  }
  return names;
}

/** Every export of the entry, and for each the names of other exports its signature mentions. */
function entryExports(): Map<string, Set<string>> {
  const program = ts.createProgram([entryPath], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2023,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    customConditions: ["@skyward/source"],
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entryPath);
  const moduleSymbol = source && checker.getSymbolAtLocation(source);
  if (!moduleSymbol) throw new Error(`cannot read ${entryPath}`);
  const resolve = (symbol: ts.Symbol) =>
    symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  const exported = checker.getExportsOfModule(moduleSymbol);
  const nameOf = new Map(exported.map((symbol) => [resolve(symbol), symbol.getName()]));
  const mentions = new Map<string, Set<string>>();
  for (const symbol of exported) {
    const named = new Set<string>();
    const visit = (node: ts.Node): void => {
      // Bodies and initial values are the implementation, not what a caller writes against.
      if (ts.isBlock(node)) return;
      if (ts.isPropertyDeclaration(node) || ts.isMethodDeclaration(node)) {
        const hidden =
          ts.getCombinedModifierFlags(node) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected);
        if (hidden || ts.isPrivateIdentifier(node.name)) return;
      }
      if (
        ts.isTypeReferenceNode(node) ||
        ts.isExpressionWithTypeArguments(node) ||
        ts.isTypeQueryNode(node)
      ) {
        const target = ts.isTypeReferenceNode(node)
          ? node.typeName
          : ts.isTypeQueryNode(node)
            ? node.exprName
            : node.expression;
        const referenced = checker.getSymbolAtLocation(target);
        const name = referenced && nameOf.get(resolve(referenced));
        if (name) named.add(name);
      }
      if (ts.isVariableDeclaration(node)) {
        if (node.type) visit(node.type);
        return;
      }
      ts.forEachChild(node, visit);
    };
    for (const declaration of resolve(symbol).declarations ?? []) visit(declaration);
    mentions.set(symbol.getName(), named);
  }
  return mentions;
}

/** The exports neither listed with a user nor named by the signature of one that is, sorted. */
function exportsWithoutUser(
  mentions: ReadonlyMap<string, ReadonlySet<string>>,
  used: Iterable<string>,
): string[] {
  const reached = new Set([...used].filter((name) => mentions.has(name)));
  for (const pending = [...reached]; pending.length > 0; ) {
    for (const named of mentions.get(pending.pop() ?? "") ?? []) {
      if (!reached.has(named)) {
        reached.add(named);
        pending.push(named);
      }
    }
  }
  return [...mentions.keys()].filter((name) => !reached.has(name)).sort();
}

describe("@skyward/core/contract", () => {
  const exports = entryExports();

  it("names a user outside core for each export, or a used export whose signature names it", () => {
    expect(exportsWithoutUser(exports, Object.keys(USERS))).toEqual([]);
  });

  it("lists no user for a name the entry does not export", () => {
    expect(Object.keys(USERS).filter((name) => !exports.has(name))).toEqual([]);
  });

  it("each listed user imports the name from @skyward/core/contract", () => {
    const imports = new Map<string, Set<string>>();
    const importsOf = (file: string) => {
      let names = imports.get(file);
      if (!names) {
        names = contractImportsOf(readFileSync(join(repositoryRoot, file), "utf8"));
        imports.set(file, names);
      }
      return names;
    };
    const unused = Object.entries(USERS)
      .filter(([name, users]) => ![users].flat().some((file) => importsOf(file).has(name)))
      .map(([name, users]) => `${name}: ${[users].flat().join(", ")}`);
    expect(unused).toEqual([]);
  });

  it("fails on an export without a user, and reads both import forms", () => {
    const mentions = new Map([
      ["ProviderV1", new Set(["ProvisionOptions"])],
      ["ProvisionOptions", new Set<string>()],
      ["kernelInternal", new Set<string>()],
    ]);
    expect(exportsWithoutUser(mentions, ["ProviderV1"])).toEqual(["kernelInternal"]);
    const text =
      'import { a, type B as C } from "@skyward/core/contract";\nexport { D } from "@skyward/core/contract";\nimport type { E } from "@skyward/core";';
    expect([...contractImportsOf(text)]).toEqual(["a", "B", "D"]);
  });
});
