import { describe, expect, it } from "vitest";
import { renderTable } from "./table.js";

describe("renderTable", () => {
  it("pads columns to their widest cell, right-aligns numbers and trims line ends", () => {
    const table = renderTable(
      [
        { header: "NAME", cell: (row: { name: string; price: string }) => row.name },
        { header: "$/H", cell: (row) => row.price, align: "right" },
        { header: "NOTE", cell: () => "" },
      ],
      [
        { name: "a100", price: "1.100" },
        { name: "h100-sxm", price: "12.000" },
      ],
    );
    expect(table).toBe(["NAME         $/H  NOTE", "a100       1.100", "h100-sxm  12.000"].join("\n"));
  });

  it("prints only the header for no rows, and keeps each row on one line", () => {
    expect(renderTable([{ header: "ID", cell: (row: string) => row }], [])).toBe("ID");
    expect(renderTable([{ header: "ID", cell: (row: string) => row }], ["a\nb"])).toBe("ID\na b");
  });
});
