#!/bin/bash
# Reference solution; runs in the workdir (/app).
echo 'Hello, OpenForge!' > hello.txt
