// swift-tools-version:6.0
import PackageDescription

/// One executable target per example, each in `Examples/<name>/`.
let examples = [
    "observer", "custom-source", "timers", "skeleton-thread",
    "checkin", "message-port-checkin", "multiprocess-checkin",
]

let package = Package(
    name: "RunLoopKit",
    products: [
        .library(name: "RunLoopKit", targets: ["RunLoopKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    ],
    targets: [
        // libzmq from Debian's libzmq3-dev. No pkgConfig: its flags name krb5's include
        // directory, which SwiftPM rejects with a warning, and zmq.h is in /usr/include.
        .systemLibrary(name: "CZeroMQ"),
        .systemLibrary(name: "CLinuxPoll"),
        .target(
            name: "RunLoopKit",
            dependencies: [
                "CZeroMQ",
                "CLinuxPoll",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "RunLoopKitTests", dependencies: ["RunLoopKit", "CZeroMQ"]),
    ] + examples.map { name in
        .executableTarget(
            name: name,
            dependencies: [
                "RunLoopKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/\(name)"
        )
    },
    swiftLanguageModes: [.v6]
)
