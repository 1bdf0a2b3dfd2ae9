/** A small plain-text table printer: a header row, columns padded to their widest cell. */

/** One column of a table. */
export interface TableColumn<Row> {
  /** The header text. */
  readonly header: string;
  /** The cell text for a row. */
  readonly cell: (row: Row) => string;
  /** Right-aligned (numbers, prices). Default left. */
  readonly align?: "left" | "right";
}

/** Renders rows as aligned text: a header line then one line per row, columns two spaces apart. */
export function renderTable<Row>(columns: readonly TableColumn<Row>[], rows: readonly Row[]): string {
  const cells = rows.map((row) => columns.map((column) => column.cell(row).replace(/\s+/g, " ")));
  const widths = columns.map((column, index) =>
    Math.max(column.header.length, ...cells.map((line) => (line[index] as string).length)),
  );
  const line = (texts: readonly string[]) =>
    texts
      .map((text, index) => {
        const width = widths[index] as number;
        return columns[index]?.align === "right" ? text.padStart(width) : text.padEnd(width);
      })
      .join("  ")
      .trimEnd();
  return [line(columns.map((column) => column.header)), ...cells.map(line)].join("\n");
}
