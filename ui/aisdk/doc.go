package aisdk
