import Testing
@testable import NotedCore
