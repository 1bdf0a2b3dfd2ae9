/**
 * `@skyward/core` — run Python functions on cloud GPU pools from TypeScript: what users write.
 *
 * Use it as a namespace: `import * as sky from "@skyward/core"`. Provider and plugin authors build
 * on `@skyward/core/contract`; tools read config files with `@skyward/core/config` and log files
 * with `@skyward/core/logs`.
 */

// Distributed collections (pool.dict, pool.queue …)
export type {
  BlockingCallOptions,
  CollectionCallOptions,
  DistributedBarrier,
  DistributedCounter,
  DistributedDict,
  DistributedLock,
  DistributedQueue,
  DistributedSet,
} from "./collections/client.js";
export type { ComputeOptions } from "./compute.js";
export { compute, withCompute } from "./compute.js";
// The contracts' types, for annotations (building providers and plugins: `@skyward/core/contract`)
export type { PluginV1 } from "./contract/plugin.js";
export { PluginError } from "./contract/plugin.js";
export type { Provider, ProviderV1 } from "./contract/provider.js";
// Errors
export type {
  ConfigurationIssue,
  ProvisionAttempt,
  RemoteRefProblem,
  SkywardErrorOptions,
  TaskInterruptionReason,
} from "./errors/errors.js";
export {
  BootstrapError,
  BudgetExceededError,
  CancelledError,
  CommandFailedError,
  ConfigurationError,
  ConnectionError,
  FunctionNotFoundError,
  NoCapacityError,
  NodeUnavailableError,
  NoOffersError,
  ProtocolError,
  ProvisionError,
  RemoteRefError,
  RemoteTaskError,
  SerializationError,
  SkywardError,
  TaskDetachedError,
  TaskInterruptedError,
  TaskTimeoutError,
  WorkerDiedError,
} from "./errors/errors.js";
export type { LocalCluster, LocalSettings } from "./local/local-provider.js";
export { Local } from "./local/local-provider.js";
export type { ConsoleSink } from "./observe/console.js";
// Events
export type {
  BootstrapPhaseEvent,
  BudgetEvent,
  BudgetExceededEvent,
  BudgetWarningEvent,
  DashboardReadyEvent,
  ErrorOccurredEvent,
  EventBase,
  EventHandler,
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
  ProvisionProgressEvent,
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
} from "./observe/events.js";
export { POOL_STATES } from "./observe/events.js";
export type {
  BuiltinMetricCollector,
  CustomMetricCollector,
  DiskMetricCollector,
  MetricCollector,
  MetricCollectorKind,
  MetricOptions,
} from "./observe/metrics.js";
export { metrics } from "./observe/metrics.js";
// Pools and dispatch
export type { CommandOptions, CommandResult } from "./pool/commands.js";
export { script, shell } from "./pool/commands.js";
export type { NodeCost, PoolCost } from "./pool/cost.js";
export type { AttachedFrom } from "./pool/dashboard-option.js";
export type {
  BroadcastResults,
  DetachOptions,
  MapItem,
  NodeTraffic,
  Pool,
  PoolNode,
  ResultOf,
  RunOptions,
  RunTarget,
  StreamOptions,
  TaskHandle,
  WaitOptions,
  WorkerPlace,
} from "./pool/pool.js";
export type {
  Kwargs,
  KwargsArgument,
  Pending,
  PendingStream,
  PendingTask,
  PythonFunction,
  PythonFunctionOptions,
  PythonStreamFunction,
  RetryPolicy,
  StreamRetryPolicy,
  WithRemoteRefs,
} from "./pool/python-function.js";
export { isPending, kwargs, python } from "./pool/python-function.js";
export type { RemoteRefNodeStats, RemoteRefStats } from "./pool/remote-refs.js";
export type {
  DType,
  DTypeArrays,
  DTypeOf,
  RemoteRefState,
  TableKind,
  TypedArray,
} from "./protocol/values.js";
export { asArrowTable, NDArray, PyObject, RemoteRef, tableKind } from "./protocol/values.js";
export {
  type AttachedPool,
  type AttachOptions,
  attach,
  type CollectedResult,
  type DetachedPool,
  detachedPools,
  forgetDetachedPool,
} from "./session/attach.js";
export { type Session, session } from "./session-pools.js";
// Accelerators
export type {
  Accelerator,
  AcceleratorFactories,
  AcceleratorManufacturer,
  AcceleratorName,
  AcceleratorOptions,
  AcceleratorOptionsFor,
  CustomAcceleratorOptions,
} from "./spec/accelerators.js";
export { accelerators } from "./spec/accelerators.js";
// Pool requests
export type {
  ComputeInput,
  FlatComputeInput,
  MultiSpecComputeInput,
  NamedComputeInput,
} from "./spec/compute-input.js";
// Container images
export type {
  CudaImageOptions,
  CudaRepository,
  CudaVariant,
  DockerImageMetadata,
  PytorchImageOptions,
  RunPodBaseImageOptions,
} from "./spec/containers.js";
export { containers, DockerImage } from "./spec/containers.js";
// Images, specs, topology, volumes, options, metrics, durations
export type { Image, ImageInput, PipIndex } from "./spec/image.js";
export { image, pipIndex } from "./spec/image.js";
export type {
  Budget,
  BudgetInput,
  ConsoleMode,
  Dashboard,
  DashboardInput,
  HealthChecker,
  HealthCheckerInput,
  LogConfig,
  LogConfigInput,
  LogLevel,
  Options,
  OptionsInput,
  PythonFunctionReference,
  SelectionStrategy,
  Worker,
  WorkerInput,
} from "./spec/options.js";
export { logConfig, options, worker } from "./spec/options.js";
export type { SecretInput, SecretSource, Secrets, SecretsInput } from "./spec/secrets.js";
export type {
  AllocationStrategy,
  Architecture,
  Nodes,
  NodesInput,
  PoolSpec,
  Spec,
  SpecInput,
} from "./spec/spec.js";
export { nodes, spec } from "./spec/spec.js";
export { time } from "./spec/time.js";
export type { StorageEndpoint, Volume, VolumeInput, VolumeStorageClient } from "./spec/volume.js";
export { isVolumeStorageClient, volume } from "./spec/volume.js";
export { version } from "./version.js";
