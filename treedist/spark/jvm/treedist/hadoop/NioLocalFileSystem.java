package treedist.hadoop;

import org.apache.hadoop.fs.LocalFileSystem;

/** Hadoop's checksummed local file system (`file:`) over {@link NioRawLocalFileSystem}. */
public class NioLocalFileSystem extends LocalFileSystem {
    public NioLocalFileSystem() {
        super(new NioRawLocalFileSystem());
    }
}
