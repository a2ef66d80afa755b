#!/bin/sh
echo "ran as $0"
