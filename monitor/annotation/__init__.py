"""The annotation server of the review queue (Label Studio): its HTTP API, and the local
service the project's scripts install and the tests start (docs/review-queue.md)."""
