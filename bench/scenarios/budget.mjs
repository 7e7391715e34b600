// The CPU budget of docs/performance.md, gathered from one run's results: the figures of the
// 100-event, 64-connection ingest run and of the filtered reads, in one place.
export function budgetOf(r) {
  const run = r.ingest?.batch100_c64;
  const fr = r.filteredReads;
  const p99 = (phase) =>
    fr ? Object.fromEntries(Object.entries(fr[phase]).map(([k, v]) => [k, v.p99])) : null;
  return {
    commit: r.commit,
    serverCpuUsPerEvent: run?.cpuUsPerEvent?.server ?? null,
    postgresCpuUsPerEvent: run?.cpuUsPerEvent?.postgres ?? null,
    loadGeneratorCpuUsPerEvent: run?.cpuUsPerEvent?.loadGenerator ?? null,
    totalCpuUsPerEvent: run?.cpuUsPerEvent?.total ?? null,
    eventsPerSec: run?.eventsPerSec ?? null,
    p99Ms: run?.latencyMs?.p99 ?? null,
    targets: {
      serverCpuUsPerEvent: 12,
      postgresCpuUsPerEvent: 24,
      totalCpuUsPerEvent: 40,
      eventsPerSec: 50_000,
      p99Ms: 150,
      filteredReadP99Ms: 100,
      ingestLossOfPeakDuringFilteredReads: 0.1,
    },
    filteredReadsP99Ms: fr ? { quiet: p99('quiet'), underIngest: p99('underIngest') } : null,
    ingestDuringFilteredReads: fr?.ingest ?? null,
  };
}
