// Package bench will hold the load tool (produce, consume, end-to-end
// latency, compare) that speaks to any Kafka-compatible broker over the
// Kafka protocol only. Until it exists, Go benchmarks live beside the code
// (segment, log, protocol).
package bench
