module github.com/zoo-dev/zoo

go 1.26.8
