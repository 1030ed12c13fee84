// swift-tools-version:6.2
import PackageDescription

/// One executable target per example, each in `Examples/<name>/`.
let examples = [
    "observer", "custom-source", "timers", "skeleton-thread",
    "checkin", "message-port-checkin", "multiprocess-checkin",
    "keep-alive", "actor-worker", "main-actor", "pool-server", "image-handoff",
]
/// The examples that take no command-line arguments, so do not import ArgumentParser.
let examplesWithoutArguments: Set = ["custom-source", "timers", "actor-worker"]
/// The funnels' errno-injection seam (`ErrnoInjection`), for the tests of their retry and
/// failure paths: compiled into debug builds only, so release funnels have no check at all.
let errnoInjection: [SwiftSetting] = [.define("ERRNO_INJECTION", .when(configuration: .debug))]

let package = Package(
    name: "RunLoopKit",
    products: [
        .library(name: "RunLoopKit", targets: ["RunLoopKit"]),
        .executable(name: "runloopkit", targets: ["RunLoopKitTool"]),
        .executable(name: "runloopkit-bench", targets: ["RunLoopKitBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-docc-plugin.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.3.0"),
    ],
    targets: [
        // libzmq from Debian's libzmq3-dev. No pkgConfig: its flags name krb5's include
        // directory, which SwiftPM rejects with a warning, and zmq.h is in /usr/include.
        .systemLibrary(name: "CZeroMQ"),
        .systemLibrary(name: "CLinuxPoll"),
        // The async-signal-safe handler behind signal sources (C: a handler may do nothing else).
        .target(name: "CSignalRelay"),
        // The buffers a socket reuses for the frames it hands libzmq (C11 atomics: a free
        // list other threads give back to, lock-free). No libzmq call: RunLoopZMQ makes them.
        .target(name: "CFramePool"),
        // accept4 as libc's, except that a libzmq listener's EMFILE drops the pending
        // connection through a reserved descriptor (libzmq would abort or spin on it).
        .target(name: "CAcceptGuard"),
        // The layers, lowest first; each target imports only the ones above it in this list.
        // System calls through one funnel with typed errno, locks, time, threads, signals.
        .target(name: "RunLoopSystem", dependencies: ["CLinuxPoll", "CSignalRelay"], swiftSettings: errnoInjection),
        // libzmq's sockets, options, CURVE and socket monitors, over RunLoopSystem.
        .target(name: "RunLoopZMQ", dependencies: ["CZeroMQ", "CFramePool", "CAcceptGuard", "RunLoopSystem"],
                swiftSettings: errnoInjection),
        // The wire format as bytes only (docs/wire-format.md): no socket, no port.
        .target(name: "RunLoopWire"),
        // The run loop: modes, sources, timers, observers, performs, the poller and the
        // source protocol that ports and descriptor sources implement. No port type.
        .target(
            name: "RunLoopCore",
            dependencies: [
                "RunLoopSystem",
                "CLinuxPoll",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // What users import: ports, workers, Swift concurrency, introspection, over the core.
        .target(
            name: "RunLoopKit",
            dependencies: [
                "RunLoopCore",
                "RunLoopSystem",
                "RunLoopZMQ",
                "RunLoopWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Atomics", package: "swift-atomics"),
            ]
        ),
        // The latency histogram and percentiles the tool and the bench share (package
        // access, in no product: no part of RunLoopKit's API).
        .target(name: "LatencyStatistics", dependencies: [.product(name: "Histogram", package: "hdrhistogram-swift")],
                path: "Tools/LatencyStatistics"),
        .executableTarget(
            name: "RunLoopKitTool",
            dependencies: [
                "RunLoopKit",
                "LatencyStatistics",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/runloopkit"
        ),
        .executableTarget(
            name: "RunLoopKitBench",
            dependencies: [
                "RunLoopKit",
                "CZeroMQ",
                "CLinuxPoll",
                "LatencyStatistics",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Benchmarks/runloopkit-bench"
        ),
        // Allocations per message, counted by an interposed malloc (CI runs it in release).
        .target(name: "CMallocCounter", path: "Benchmarks/CMallocCounter"),
        .executableTarget(name: "alloc-counter", dependencies: ["RunLoopKit", "CMallocCounter"],
                          path: "Benchmarks/alloc-counter"),
        // The scenarios whose instructions per message .ci/check-instructions counts under
        // callgrind, against Benchmarks/Thresholds/instructions.json.
        .executableTarget(name: "instruction-counter", dependencies: ["RunLoopKit"],
                          path: "Benchmarks/instruction-counter"),
        // libFuzzer target for the wire decoder (see the file's header for how to build it).
        .executableTarget(name: "WireDecoderFuzz", dependencies: ["RunLoopKit", "RunLoopWire"], path: "Fuzz/wire-decoder"),
        // What an async main and dispatchMain() do to the main loop, for MainQueueTests.
        .executableTarget(name: "main-queue-probe", dependencies: ["RunLoopKit"], path: "Tests/probes/main-queue-probe"),
        // A process that sends to another's port and then ends, for ExitFlushTests.
        .executableTarget(name: "exit-flush-probe",
                          dependencies: ["RunLoopKit", .product(name: "Logging", package: "swift-log")],
                          path: "Tests/probes/exit-flush-probe"),
        // Helpers shared by the test targets: threads, child processes, built executables,
        // /proc readings, ZeroMQ socket pairs, a fake port source, a recording metrics
        // backend. Over the public and package API only.
        .target(name: "RunLoopTestSupport",
                dependencies: ["RunLoopSystem", "RunLoopZMQ", "RunLoopCore",
                               .product(name: "CoreMetrics", package: "swift-metrics")],
                path: "Tests/RunLoopTestSupport"),
        // A test target per layer: each imports its own layer with @testable and lower layers
        // plainly, where a test needs them to set up (RunLoopKitTests imports RunLoopCore
        // with @testable where a test reads a core internal: docs/architecture.md).
        .testTarget(name: "RunLoopSystemTests", dependencies: ["RunLoopSystem"], swiftSettings: errnoInjection),
        .testTarget(name: "RunLoopZMQTests", dependencies: ["RunLoopZMQ", "RunLoopSystem", "CZeroMQ", "CFramePool", "RunLoopTestSupport"],
                    swiftSettings: errnoInjection),
        .testTarget(name: "RunLoopWireTests", dependencies: ["RunLoopWire"]),
        // The bench's verdicts and reports (its measurements are judged by running it).
        .testTarget(name: "RunLoopKitBenchTests", dependencies: ["RunLoopKitBench"]),
        .testTarget(name: "LatencyStatisticsTests", dependencies: ["LatencyStatistics"]),
        .testTarget(
            name: "RunLoopCoreTests",
            dependencies: ["RunLoopCore", "RunLoopSystem", "CLinuxPoll", "RunLoopTestSupport",
                           .product(name: "CoreMetrics", package: "swift-metrics")]
        ),
        .testTarget(
            name: "RunLoopKitTests",
            dependencies: [
                "RunLoopKit",
                "RunLoopCore",
                "RunLoopZMQ",
                "RunLoopWire",
                "CAcceptGuard",
                "CZeroMQ",
                "CLinuxPoll",
                "RunLoopTestSupport",
                "RunLoopSystem",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: errnoInjection
        ),
    ] + examples.map { name in
        .executableTarget(
            name: name,
            dependencies: examplesWithoutArguments.contains(name) ? ["RunLoopKit"] : [
                "RunLoopKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/\(name)"
        )
    },
    swiftLanguageModes: [.v6]
)
