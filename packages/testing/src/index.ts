// Core helpers the conformance suite relies on, re-exported for provider tests.
export { clusterFromInstance, offerPrice } from "@skyward/core/contract";
export {
  type BuiltCli,
  builtCli,
  type CliProject,
  type CliProjectOptions,
  type CliRun,
  createCliProject,
  tableRows,
} from "./cli-project.js";
export { providerFromToml, tomlProviderEntry, tomlProviderIssues } from "./config-entry.js";
export {
  instanceProblems,
  offerProblems,
  offerQueryProblems,
  type ProviderConformanceOptions,
  type ProviderConformancePool,
  type ProviderConformanceSupport,
  runProviderConformance,
  workerEndpointProblems,
} from "./conformance.js";
export { type FakeFaultSwitches, fakeFaultSwitches } from "./fake-faults.js";
export {
  type FakeGceMetadata,
  type FakeGceMetadataRequest,
  type GceMaintenanceEvent,
  startFakeGceMetadata,
} from "./fake-gce-metadata.js";
export {
  type FakeImds,
  type FakeImdsOptions,
  type FakeImdsRequest,
  type FakeImdsRole,
  IMDS_ADDRESS,
  type NamespaceImds,
  serveFakeImdsInNamespace,
  startFakeImds,
} from "./fake-imds.js";
export {
  type FakeRestAnswer,
  type FakeRestHandler,
  type FakeRestRequest,
  type FakeRestServer,
  type FakeRestServerOptions,
  fakeRoutes,
  jsonAnswer,
  startFakeRestServer,
  textAnswer,
} from "./fake-rest.js";
export {
  type FarLink,
  type FarLinkOptions,
  startFarLink,
  type TestbedFarHosts,
  type TestbedFarHostsOptions,
  testbedFarHosts,
} from "./far-link.js";
export {
  apiCellsNotApplicable,
  type BillingInstance,
  FAULT_CELLS,
  type FaultCell,
  type FaultController,
  type FaultMatrixOptions,
  runFaultMatrix,
} from "./fault-matrix.js";
export { type FaultSwitches, faultSwitches } from "./fault-switches.js";
export { type LocalSecretLeaks, localSecretLeaks, withLocalNodeRoot } from "./local-secrets.js";
export { type MswFake, preparedCluster, useMswFake } from "./msw-fake.js";
export { packedFiles } from "./package-files.js";
export {
  conformanceCluster,
  fakeLaunchContext,
  type PluginConformanceOptions,
  type PluginConformanceSupport,
  runPluginConformance,
} from "./plugin-conformance.js";
export {
  type BootstrapRun,
  type BootstrapRunOptions,
  type BootstrapScriptTextOptions,
  bootstrapScriptText,
  configurationIssuesOf,
  expectPeerPluginRefused,
  fakeCluster,
  runBootstrapScript,
} from "./plugin-helpers.js";
export {
  isCi,
  type RequireSystemPythonOptions,
  requirePrerequisite,
  requireSystemPython,
} from "./prerequisites.js";
export { isProcessRunning } from "./process.js";
export {
  createPypiProxy,
  PYPI_ENDPOINTS,
  type PypiProxy,
  type PypiProxyOptions,
  type PypiProxyRequest,
} from "./pypi-proxy.js";
export {
  type CommandLineFinding,
  DEFAULT_SECRET_PATTERNS,
  type PlantedSecret,
  plantedSecretsIn,
  type SecretFinding,
  type SecretPattern,
  type SecretScanOptions,
  type SecretScanReport,
  scanCommandLinesForSecrets,
  scanForSecrets,
} from "./secret-scan.js";
export { type ScratchSkywardHome, useScratchSkywardHome } from "./skyward-home.js";
export {
  type CreateTestbedOptions,
  checkTestbedPrerequisites,
  cleanupStaleTestbeds,
  createTestbed,
  requireTestbed,
  type StaleTestbedCleanup,
  TESTBED_DIRECTORY_PARENT,
  TESTBED_NAME_PREFIX,
  type Testbed,
  type TestbedExecOptions,
  type TestbedExecResult,
  type TestbedHost,
  type TestbedSshHostInput,
  type TestbedSshHostOptions,
  type TestbedSshHostsOptions,
  testbedSkipReason,
  testbedSshHost,
  testbedSshHosts,
} from "./testbed.js";
export { type TestbedHostPool, testbedHostPool } from "./testbed-host-pool.js";
export {
  type DetachAttachScenario,
  eventually,
  expectDetachAttach,
  expectPreemptedNodeReplaced,
  type FakeApiFixture,
  type PoolTaskRun,
  type PreemptionScenario,
  poolTaskRuns,
  poolTasks,
  startTestbedMachines,
  type TestbedAndHomeFixture,
  type TestbedMachines,
  type TestbedSshPoolFixture,
  testbedAddressAt,
  testbedHostAt,
  testbedStandIn,
  useFakeApi,
  useTestbedAndHome,
  useTestbedSshPool,
  waitFor,
} from "./testbed-pool.js";
export {
  type CreateSlurmTestbedOptions,
  createSlurmTestbed,
  requireEnvironmentModules,
  requireSlurmTestbed,
  SLURM_TESTBED_PARTITION,
  SLURM_TESTBED_PREEMPTIBLE_PARTITION,
  type SlurmComputeNode,
  type SlurmTestbed,
  type SlurmTestbedLogin,
} from "./testbed-slurm.js";
export {
  ddpTasks,
  expectAllReduceSum,
  expectClose,
  expectDdpAgreement,
  expectGlooWorld,
  type Gradients,
  type GroupInfo,
} from "./torch-ddp.js";
export { whenRunning } from "./when-running.js";
