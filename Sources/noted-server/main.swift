import NotedServer
import ArgumentParser
print("x")
