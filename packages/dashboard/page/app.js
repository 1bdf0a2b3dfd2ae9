// The dashboard page: loads the pool's history from the JSON endpoints, then follows the event
// stream (one batch a second) and redraws at most once per batch, only while the tab is visible.

(() => {
  const token = new URLSearchParams(location.search).get("token") ?? "";
  const LEVELS = ["TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];
  const EVENT_LIMIT = 500;
  const LOG_LIMIT = 2000;
  const { ChartGroup } = window.SkywardCharts;

  const byId = (id) => document.getElementById(id);
  const withToken = (path) => `${path}${path.includes("?") ? "&" : "?"}token=${encodeURIComponent(token)}`;
  const getJson = async (path) => {
    const response = await fetch(withToken(path));
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    return response.json();
  };

  let charts = new Map();
  let throughput;
  let cost;
  let lastCompleted;
  let logs = [];
  let stream;
  let redrawPending = false;

  const duration = (ms) => {
    const seconds = Math.max(0, Math.floor(ms / 1000));
    const hours = Math.floor(seconds / 3600);
    const minutes = Math.floor((seconds % 3600) / 60);
    return hours > 0 ? `${hours}h ${minutes}m` : `${minutes}m ${seconds % 60}s`;
  };
  const dollars = (value) => `$${value.toFixed(value < 1 ? 4 : 2)}`;
  const clock = (ms) => new Date(ms).toLocaleTimeString();
  const cell = (text) => {
    const td = document.createElement("td");
    td.textContent = text;
    return td;
  };

  function seriesLabel(series) {
    let label = `node ${series.node}`;
    if (series.gpu !== null) label += ` gpu ${series.gpu}`;
    if (series.worker !== null) label += ` worker ${series.worker}`;
    return label;
  }

  function chartFor(series) {
    const name = series.name;
    let chart = charts.get(name);
    if (chart === undefined) {
      const container = document.createElement("div");
      container.className = "chart";
      container.id = `chart-metric-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
      container.dataset.metric = name;
      byId("metric-charts").append(container);
      chart = new ChartGroup(container, name, series.unit);
      charts.set(name, chart);
    }
    return chart;
  }

  function addCompleted(time, completed) {
    if (lastCompleted !== undefined && time > lastCompleted.time) {
      const perMinute = ((completed - lastCompleted.count) / (time - lastCompleted.time)) * 60_000;
      throughput.add("completed", time, perMinute);
    }
    lastCompleted = { time, count: completed };
  }

  function renderPool(pool) {
    byId("pool-id").textContent = pool.id;
    byId("pool-state").textContent = pool.state;
    byId("pool-provider").textContent = pool.provider ?? "";
    for (const [field, value] of Object.entries(pool.tasks)) {
      const target = document.querySelector(`#task-counters [data-field="${field}"]`);
      if (target) target.textContent = String(value);
    }
    const costFields = {
      hourlyRate: `${dollars(pool.cost.hourlyRate)}/h`,
      total: dollars(pool.cost.total),
      budget: pool.cost.budget
        ? `${dollars(pool.cost.budget.max)} (warn at ${dollars(pool.cost.budget.warnAt)})`
        : "none",
      budgetEndsAt: pool.cost.budgetEndsAt === null ? "–" : new Date(pool.cost.budgetEndsAt).toLocaleString(),
    };
    for (const [field, text] of Object.entries(costFields)) {
      document.querySelector(`#cost [data-field="${field}"]`).textContent = text;
    }
    const rows = pool.nodes.map((node) => {
      const row = document.createElement("tr");
      row.dataset.node = String(node.index);
      row.append(
        cell(String(node.index)),
        cell(node.phase),
        cell(node.publicIp ?? node.privateIp ?? ""),
        cell([node.instanceType, node.accelerator].filter(Boolean).join(" · ") || node.instanceId),
        cell(node.spot === null ? "?" : node.spot ? "spot" : "on-demand"),
        cell(node.hourlyPrice === null ? "?" : dollars(node.hourlyPrice)),
        cell(node.since === null ? "?" : duration(pool.now - node.since)),
      );
      return row;
    });
    byId("nodes").tBodies[0].replaceChildren(...rows);
    const nodeSelect = byId("log-node");
    for (const node of pool.nodes) {
      if (![...nodeSelect.options].some((option) => option.value === String(node.index))) {
        nodeSelect.append(new Option(`node ${node.index}`, String(node.index)));
      }
    }
    const running = pool.running.map((task) => {
      const row = document.createElement("tr");
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Cancel";
      button.addEventListener("click", () => cancelTask(task));
      const action = document.createElement("td");
      action.append(button);
      row.append(
        cell(task.id),
        cell(task.name),
        cell(String(task.node)),
        cell(duration(pool.now - task.startedAt)),
        action,
      );
      return row;
    });
    byId("running").tBodies[0].replaceChildren(...running);
    renderSessions(pool.sessions, pool.now);
  }

  // This pool's own sessions (attached from a state file, detached since) and the other detached pools.
  function renderSessions(sessions, now) {
    const origin = sessions.attachedFrom;
    const parts = [
      origin
        ? `attached at ${clock(origin.attachedAt)} from ${origin.stateFile} (detached at ${clock(origin.detachedAt)} by process ${origin.detachedBy})`
        : "opened by this client",
    ];
    if (sessions.detachedAt !== null) parts.push(`detached at ${clock(sessions.detachedAt)}`);
    parts.push(
      sessions.detachedCount === 0
        ? "no other detached pool"
        : `${sessions.detachedCount} other detached pool${sessions.detachedCount === 1 ? "" : "s"}`,
    );
    if (sessions.error) parts.push(sessions.error);
    byId("session-origin").textContent = parts.join(" · ");
    const rows = sessions.detached.map((pool) => {
      const row = document.createElement("tr");
      row.dataset.pool = pool.id;
      row.append(
        cell(pool.id),
        cell(pool.provider),
        cell(`${pool.nodes} (${pool.provider === "local" ? pool.alive : "?"})`),
        cell(String(pool.tasks)),
        cell(`${duration(now - pool.detachedAt)} ago`),
        cell(duration(pool.ttl * 1000)),
        cell(pool.hourlyRate === null ? "?" : dollars(pool.hourlyRate)),
      );
      return row;
    });
    byId("detached-pools").tBodies[0].replaceChildren(...rows);
    byId("detached-pools").hidden = rows.length === 0;
  }

  function entryItem(entry) {
    const item = document.createElement("li");
    item.className = entry.level;
    item.dataset.node = entry.node === null ? "" : String(entry.node);
    const where = entry.node === null ? "" : ` [node ${entry.node}]`;
    item.textContent = `${clock(entry.timestamp)} ${entry.level.padEnd(7)}${where} ${entry.text}`;
    return item;
  }

  function logVisible(entry) {
    const node = byId("log-node").value;
    const level = LEVELS.indexOf(byId("log-level").value);
    return (node === "" || String(entry.node) === node) && LEVELS.indexOf(entry.level) >= level;
  }

  function appendBounded(list, items, limit) {
    if (items.length === 0) return;
    const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
    list.append(...items);
    while (list.childElementCount > limit) list.firstElementChild.remove();
    if (atBottom) list.scrollTop = list.scrollHeight;
  }

  function addLogs(entries) {
    logs.push(...entries);
    if (logs.length > LOG_LIMIT) logs = logs.slice(-LOG_LIMIT);
    appendBounded(byId("log"), entries.filter(logVisible).map(entryItem), LOG_LIMIT);
  }

  function rerenderLogs() {
    byId("log").replaceChildren(...logs.filter(logVisible).map(entryItem));
  }

  function scheduleRedraw() {
    if (redrawPending) return;
    redrawPending = true;
    requestAnimationFrame(() => {
      redrawPending = false;
      if (document.hidden) return;
      const windowSeconds = Number(byId("window").value);
      throughput.render(windowSeconds);
      cost.render(windowSeconds);
      for (const chart of charts.values()) chart.render(windowSeconds);
    });
  }

  function applyBatch(batch) {
    renderPool(batch.pool);
    for (const sample of batch.samples) chartFor(sample).add(seriesLabel(sample), sample.t, sample.v);
    addCompleted(batch.pool.now, batch.pool.tasks.completed);
    cost.add("spent", batch.pool.now, batch.pool.cost.total);
    appendBounded(byId("events"), batch.events.map(entryItem), EVENT_LIMIT);
    addLogs(batch.logs);
    scheduleRedraw();
  }

  function resetCharts() {
    byId("metric-charts").replaceChildren();
    byId("chart-throughput").replaceChildren();
    byId("chart-cost").replaceChildren();
    charts = new Map();
    throughput = new ChartGroup(byId("chart-throughput"), "tasks / min", "");
    cost = new ChartGroup(byId("chart-cost"), "spent", "USD");
    lastCompleted = undefined;
  }

  async function load() {
    stream?.close();
    resetCharts();
    const [pool, metrics, events] = await Promise.all([
      getJson("api/pool"),
      getJson("api/metrics"),
      getJson("api/events"),
    ]);
    renderPool(pool);
    for (const series of metrics.series) {
      const chart = chartFor(series);
      for (const point of series.points) chart.add(seriesLabel(series), point.t, point.v);
    }
    for (const point of metrics.tasksCompleted) addCompleted(point.t, point.v);
    for (const point of metrics.cost) cost.add("spent", point.t, point.v);
    byId("events").replaceChildren(...events.events.map(entryItem));
    logs = [];
    addLogs(events.logs);
    scheduleRedraw();
    const lastId = Math.min(pool.lastId, metrics.lastId, events.lastId);
    stream = new EventSource(withToken(`api/stream?lastEventId=${lastId}`));
    stream.addEventListener("open", () => {
      byId("connection").textContent = "live";
    });
    stream.addEventListener("error", () => {
      byId("connection").textContent = "reconnecting…";
    });
    stream.addEventListener("batch", (message) => applyBatch(JSON.parse(message.data)));
    stream.addEventListener("reset", () => void load());
  }

  async function post(path) {
    const response = await fetch(withToken(path), { method: "POST" });
    return response.json();
  }

  async function cancelTask(task) {
    if (!confirm(`Cancel task ${task.id} (${task.name}) on node ${task.node}?`)) return;
    await post(`api/tasks/${encodeURIComponent(task.id)}/cancel`);
  }

  byId("close-pool").addEventListener("click", async () => {
    if (!confirm("Close the pool? Its tasks are cancelled and its instances terminated.")) return;
    await post("api/close");
  });
  byId("log-node").addEventListener("change", rerenderLogs);
  byId("log-level").addEventListener("change", rerenderLogs);
  byId("window").addEventListener("change", () => {
    for (const chart of [throughput, cost, ...charts.values()]) chart.dirty = true;
    scheduleRedraw();
  });
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) scheduleRedraw();
  });
  load().catch((error) => {
    byId("connection").textContent = String(error.message);
  });
})();
