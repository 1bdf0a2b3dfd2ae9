/**
 * `@skyward/core` — run Python functions on cloud GPU pools from TypeScript.
 *
 * Use it as a namespace: `import * as sky from "@skyward/core"`.
 */

// Accelerators
export type {
  Accelerator,
  AcceleratorCatalogEntry,
  AcceleratorFactories,
  AcceleratorManufacturer,
  AcceleratorName,
  AcceleratorOptions,
  AcceleratorOptionsFor,
  CustomAcceleratorOptions,
} from "./accelerators.js";
export {
  acceleratorCatalog,
  acceleratorFromName,
  accelerators,
  canonicalAcceleratorName,
} from "./accelerators.js";
// Pool requests and configuration files
export type {
  ComputeInput,
  FlatComputeInput,
  MultiSpecComputeInput,
  NamedComputeInput,
  ResolvedCompute,
} from "./compute-input.js";
export { resolveComputeInput } from "./compute-input.js";
export type {
  ConfigLocations,
  CreateProviderFromConfig,
  NamedPool,
  PoolEntry,
  ProviderEntry,
  SkywardConfig,
} from "./config-file.js";
export { loadConfig, PROVIDER_PACKAGES, resolveNamedPool } from "./config-file.js";
export type { ConsoleSink } from "./console.js";
// Errors
export type { ConfigurationIssue, ProvisionAttempt, SkywardErrorOptions } from "./errors.js";
export {
  BootstrapError,
  CancelledError,
  ConfigurationError,
  ConnectionError,
  FunctionNotFoundError,
  NoCapacityError,
  NoOffersError,
  ProtocolError,
  ProvisionError,
  RemoteTaskError,
  SerializationError,
  SkywardError,
  TaskTimeoutError,
  WorkerDiedError,
} from "./errors.js";
// Events
export type {
  BootstrapPhaseEvent,
  ErrorOccurredEvent,
  EventBase,
  EventHandler,
  EventHubOptions,
  EventOf,
  LogEvent,
  MetricEvent,
  NodeBootstrappedEvent,
  NodeDestroyedEvent,
  NodeEvent,
  NodeEventBase,
  NodeLostEvent,
  NodePreemptedEvent,
  NodeProvisionedEvent,
  NodeReadyEvent,
  NodeReplacedEvent,
  PoolDestroyedEvent,
  PoolEvent,
  PoolReadyEvent,
  PoolState,
  PoolStateEvent,
  ScalingEvent,
  SkywardEvent,
  SkywardEventType,
  TaskCancelledEvent,
  TaskCompletedEvent,
  TaskEvent,
  TaskEventBase,
  TaskFailedEvent,
  TaskQueuedEvent,
  TaskStartedEvent,
} from "./events.js";
export { EventHub, POOL_STATES } from "./events.js";
export type { Image, ImageInput, PipIndex } from "./image.js";
export { contentHash, DEFAULT_IMAGE, envHash, extendImage, image, pipIndex } from "./image.js";
export type { LaunchCommandFields, LaunchContext } from "./launch-command.js";
export { LaunchCommand } from "./launch-command.js";
export type { LocalCluster, LocalSettings } from "./local-provider.js";
export { Local } from "./local-provider.js";
export type { LogRecord } from "./log-file.js";
export { formatLogRecord, parseLogLine, readLogRecords } from "./log-file.js";
export type {
  BuiltinMetricCollector,
  CustomMetricCollector,
  DiskMetricCollector,
  MetricCollector,
  MetricCollectorKind,
  MetricOptions,
} from "./metrics.js";
export { metrics } from "./metrics.js";
export type {
  ConsoleMode,
  LogConfig,
  LogConfigInput,
  LogLevel,
  Options,
  OptionsInput,
  SelectionStrategy,
  Worker,
  WorkerInput,
} from "./options.js";
export { logConfig, options, worker } from "./options.js";
export type {
  AroundClient,
  AroundClientResult,
  BootstrapFactory,
  ImageTransform,
  JsonValue,
  LauncherTransform,
  PluginBootstrapOp,
  PluginHook,
  PluginWorker,
  PluginWorkerInput,
  PoolHandle,
  WorkerModule,
  WorkersPerNode,
} from "./plugin.js";
export { isPlugin, Plugin, PluginError } from "./plugin.js";
export type {
  ComputeOptions,
  PoolNode,
  ResultOf,
  RunOptions,
  StreamOptions,
  TaskHandle,
  WaitOptions,
} from "./pool.js";
export { compute, Pool, withCompute } from "./pool.js";
// Contracts: providers, plugins, launch commands
export type {
  CleanupOptions,
  CleanupResult,
  Cluster,
  ClusterSsh,
  Instance,
  InstanceSsh,
  InstanceStatus,
  LeftPoolResource,
  Offer,
  OfferQuery,
  PoolResource,
  Provider,
  ProviderCallOptions,
  ProviderCapabilities,
  ProviderV1,
  ShellOp,
  WorkerEndpoint,
  WorkerEnvironment,
  WorkerLaunchRequest,
} from "./provider.js";
export {
  clusterFromInstance,
  isProvider,
  offerPrice,
  offerQuery,
  PROVIDER_SPECIFICATION_VERSION,
  prefersSpot,
} from "./provider.js";
// Python functions, pools and dispatch
export type {
  Kwargs,
  KwargsArgument,
  Pending,
  PendingStream,
  PendingTask,
  PythonFunction,
  PythonFunctionOptions,
  PythonStreamFunction,
} from "./python-function.js";
export { isPending, kwargs, python } from "./python-function.js";
// Specs, topology, volumes, images, options
export type {
  AllocationStrategy,
  Architecture,
  NodeSpec,
  Nodes,
  NodesInput,
  PoolSpec,
  Spec,
  SpecInput,
} from "./spec.js";
export { ALLOCATION_STRATEGIES, nodes, resolvePoolSpec, spec } from "./spec.js";
export type { SshClusterData, SshHost, SshHostInput, SshSettings } from "./ssh-provider.js";
export { SSH } from "./ssh-provider.js";
export { time } from "./time.js";
export { version } from "./version.js";
export type { StorageEndpoint, Volume, VolumeInput } from "./volume.js";
export { FORBIDDEN_MOUNTS, volume } from "./volume.js";
