// Time-series charts on uPlot: one chart per metric, one line per node (GPU, worker). Each line keeps
// at most POINT_LIMIT points in the browser: past it, every other point is dropped, so a long run
// costs the page the same memory as a short one. Charts redraw only when their data changed.

(() => {
  const POINT_LIMIT = 1440;
  const COLORS = ["#2a7ae2", "#e2612a", "#2aa15a", "#a12ae2", "#e2c12a", "#2ac1e2", "#e22a7a", "#7a7a7a"];

  class ClientSeries {
    constructor() {
      this.times = [];
      this.values = [];
    }
    add(time, value) {
      this.times.push(time);
      this.values.push(value);
      if (this.times.length > POINT_LIMIT) {
        this.times = this.times.filter((_, index) => index % 2 === 1);
        this.values = this.values.filter((_, index) => index % 2 === 1);
      }
    }
  }

  class ChartGroup {
    constructor(container, title, unit) {
      this.container = container;
      this.title = title;
      this.unit = unit;
      this.lines = new Map();
      this.plot = undefined;
      this.labels = "";
      this.dirty = true;
      const heading = document.createElement("h3");
      heading.textContent = unit ? `${title} (${unit})` : title;
      this.body = document.createElement("div");
      container.append(heading, this.body);
    }

    add(label, time, value) {
      let line = this.lines.get(label);
      if (line === undefined) {
        line = new ClientSeries();
        this.lines.set(label, line);
      }
      line.add(time, value);
      this.dirty = true;
    }

    pointCount() {
      let count = 0;
      for (const line of this.lines.values()) count += line.times.length;
      return count;
    }

    render(windowSeconds) {
      if (!this.dirty) return;
      this.dirty = false;
      const labels = [...this.lines.keys()].sort();
      const newest = Math.max(0, ...[...this.lines.values()].map((line) => line.times.at(-1) ?? 0));
      const from = windowSeconds > 0 ? newest / 1000 - windowSeconds : Number.NEGATIVE_INFINITY;
      // The lines' samples are taken at slightly different moments: align them on whole seconds.
      const columns = new Map();
      labels.forEach((label, column) => {
        const line = this.lines.get(label);
        for (let index = 0; index < line.times.length; index++) {
          const second = Math.round(line.times[index] / 1000);
          if (second < from) continue;
          let row = columns.get(second);
          if (row === undefined) {
            row = new Array(labels.length).fill(null);
            columns.set(second, row);
          }
          row[column] = line.values[index];
        }
      });
      const xs = [...columns.keys()].sort((a, b) => a - b);
      const data = [xs, ...labels.map((_, column) => xs.map((x) => columns.get(x)[column]))];
      this.container.dataset.points = String(this.pointCount());
      this.container.dataset.lines = String(labels.length);
      const key = labels.join("\n");
      const width = Math.max(200, this.container.clientWidth);
      if (this.plot !== undefined && key === this.labels) {
        if (this.plot.width !== width) this.plot.setSize({ width, height: 180 });
        this.plot.setData(data);
        return;
      }
      this.plot?.destroy();
      this.labels = key;
      this.plot = new uPlot(
        {
          width,
          height: 180,
          legend: { live: false },
          cursor: { drag: { x: true, y: false } },
          scales: { x: { time: true } },
          series: [
            {},
            ...labels.map((label, index) => ({
              label,
              stroke: COLORS[index % COLORS.length],
              width: 1.5,
              spanGaps: true,
              points: { show: false },
            })),
          ],
        },
        data,
        this.body,
      );
    }
  }

  window.SkywardCharts = { ChartGroup };
})();
