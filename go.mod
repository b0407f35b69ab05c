module github.com/inkwell/inkwell

go 1.26.8
